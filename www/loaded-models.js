// The models loaded in the Models panel, as the sections that pick one see
// them: models.js announces each load (`blindspot:model`, with the model's
// info) and unload (`blindspot:model-unloaded`). A model loaded again
// under the same name replaces the earlier one.

/** A live Map handle -> model info, kept by the panel's events; `onChange()` after each. */
export function trackLoadedModels(onChange) {
  const models = new Map();
  document.addEventListener("blindspot:model", (e) => {
    for (const [handle, m] of models) if (m.name === e.detail.name) models.delete(handle);
    models.set(e.detail.handle, e.detail);
    onChange();
  });
  document.addEventListener("blindspot:model-unloaded", (e) => {
    models.delete(e.detail.handle);
    onChange();
  });
  return models;
}

/** How a model is named in a picker: its name, precision and device. */
export const modelLabel = (m) => `${m.name} (${m.precision}, ${m.backend === "webgpu" ? "WebGPU" : "CPU"})`;

/**
 * Fills `select` with `models` (infos) and keeps a pick: the current one if
 * still there, else the first of `preferred` (infos, in order) that is
 * there, else the newest. `placeholder` when there is none.
 */
export function fillModelSelect(select, models, placeholder, preferred = []) {
  const chosen = select.value;
  const options = models.map((m) => new Option(modelLabel(m), String(m.handle)));
  select.replaceChildren(...(options.length ? options : [new Option(placeholder, "")]));
  select.disabled = !options.length;
  const there = (handle) => options.some((o) => o.value === String(handle));
  const wanted = preferred.find((m) => m && there(m.handle));
  if (there(chosen)) select.value = chosen;
  else if (wanted) select.value = String(wanted.handle);
  else if (options.length) select.value = options[options.length - 1].value;
}
