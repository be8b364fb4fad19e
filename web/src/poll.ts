// Repeats a refresh while a page is shown: every `ms` after the previous run finished, slower
// (up to 10 s) while the server does not answer, and never after stop(). A refresh that throws
// hands the error to `onError` and is tried again; success clears the error.

export interface Poller {
  stop(): void;
  now(): void; // run again at once (after a user action)
}

export function poll(
  ms: number,
  refresh: () => Promise<void>,
  onError: (e: unknown | null) => void = () => {},
): Poller {
  let stopped = false;
  let timer: number | undefined;
  let running = false;
  let failures = 0;
  const run = async () => {
    if (stopped || running) return;
    running = true;
    window.clearTimeout(timer);
    try {
      await refresh();
      failures = 0;
      onError(null);
    } catch (e) {
      failures++;
      onError(e);
    }
    running = false;
    if (!stopped) timer = window.setTimeout(run, failures ? Math.min(10000, ms * 2 ** Math.min(failures, 4)) : ms);
  };
  void run();
  return {
    stop() {
      stopped = true;
      window.clearTimeout(timer);
    },
    now() {
      void run();
    },
  };
}
