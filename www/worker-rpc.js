// What the page's workers share: starting the wasm engine in a worker, and
// calls to a worker that answers {id, value} or {id, error} (and
// {id, progress: [done, total]} on the way).

/** The engine's bindings in this worker: its own instance of the wasm. */
export async function startEngine({ glue, wasm }) {
  const bindings = await import(glue);
  await bindings.default({ module_or_path: wasm });
  return bindings;
}

/**
 * Calls to `worker`: `call(message, onProgress)` posts {id, ...message} at
 * once and resolves to the answer's value. When the worker dies (out of
 * memory, an uncaught error), every waiting call fails with `died(event)`.
 * `contain` keeps the worker's error from being reported again in this
 * scope: a nested worker's uncaught error otherwise reaches its parent's
 * global scope, which would look like the parent dying.
 */
export function connect(worker, { died, contain = false }) {
  let next = 1;
  const pending = new Map();
  const failAll = (err) => {
    for (const call of pending.values()) call.reject(err);
    pending.clear();
  };
  worker.onmessage = ({ data }) => {
    const call = pending.get(data.id);
    if (!call) return;
    if ("progress" in data) {
      call.onProgress?.(...data.progress);
      return;
    }
    pending.delete(data.id);
    if ("error" in data) call.reject(Object.assign(new Error(data.error), data.trapped ? { trapped: true } : {}));
    else call.resolve(data.value);
  };
  worker.onerror = (e) => {
    if (contain) e.preventDefault();
    failAll(died(e));
  };
  return {
    call: (message, onProgress) =>
      new Promise((resolve, reject) => {
        const id = next++;
        pending.set(id, { resolve, reject, onProgress });
        worker.postMessage({ id, ...message });
      }),
    failAll,
  };
}
