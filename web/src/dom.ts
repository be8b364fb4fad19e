// A small element builder: h("a", {href: "/jobs", class: "btn"}, "Jobs"). Attributes named on*
// with a function become listeners; `value`, `checked`, `disabled` and `selected` are set as
// properties; null, undefined and false children and attributes are left out. Text is always
// inserted as text, never parsed as HTML, so anything a job or a server sends is shown inert.

export type Child = Node | string | number | null | undefined | false | Child[];
export type Attrs = Record<string, unknown>;

const kProps = new Set(["value", "checked", "disabled", "selected", "indeterminate"]);

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on") && typeof v === "function") {
        el.addEventListener(k.slice(2), v as EventListener);
      } else if (kProps.has(k)) {
        (el as unknown as Record<string, unknown>)[k] = v;
      } else {
        el.setAttribute(k, v === true ? "" : String(v));
      }
    }
  }
  append(el, children);
  return el;
}

export function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// Replaces every child of `el`.
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}
