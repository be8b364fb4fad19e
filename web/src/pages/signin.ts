// Sign in with a token. It is checked against the server, then kept for this browser tab only
// (sessionStorage) and sent as the bearer token.
import { ApiError } from "../api";
import { h } from "../dom";
import { navigate, type Page } from "../router";
import { signIn } from "../session";
import { messageBox } from "../ui";

export function signInPage(next: string): Page {
  const msg = messageBox();
  if (new URLSearchParams(location.search).get("expired")) {
    msg.info("The server no longer accepts your token (revoked or expired). Sign in again.");
  }
  const input = h("input", {
    id: "token",
    name: "token",
    type: "password",
    autocomplete: "off",
    placeholder: "Token",
    required: true,
  });
  const button = h("button", { class: "btn primary", type: "submit", id: "sign-in" }, "Sign in");
  const form = h(
    "form",
    {
      class: "signin card",
      onsubmit: async (ev: Event) => {
        ev.preventDefault();
        button.disabled = true;
        msg.show(null);
        try {
          await signIn(input.value);
          navigate(next.startsWith("/") && !next.startsWith("//") && !next.startsWith("/signin") ? next : "/", true);
        } catch (e) {
          msg.show(e instanceof ApiError && e.status === 401 ? new Error("The server does not accept this token.") : e);
        } finally {
          button.disabled = false;
        }
      },
    },
    h("h1", null, "Sign in to Embody"),
    h("p", { class: "muted" }, "Paste an API token. It stays in this browser tab only and is sent as the bearer token."),
    h("label", { for: "token" }, "Token"),
    input,
    msg.el,
    button,
  );
  setTimeout(() => input.focus(), 0);
  return { title: "Sign in", el: h("div", { class: "page center" }, form) };
}
