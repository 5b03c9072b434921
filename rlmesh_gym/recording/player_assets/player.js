// The episode player: renders recorded episodes from data sent once (no per-step round trip).
// Used by the Jupyter widget (EpisodePlayer) and by the standalone HTML page (Recording.to_html).
// rlmeshMountPlayer(root, episodes, options) builds the player in `root` and returns a handle
// {setStep(i), setPlaying(b), step(), destroy()}; options: {step, fps, onStep(i), onPlaying(b)}.
// Every element the tests read carries a data-role attribute.
function rlmeshMountPlayer(root, episodes, options) {
  "use strict";
  options = options || {};
  const make = (tag, attrs, text) => {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const svgNS = "http://www.w3.org/2000/svg";
  const makeSvg = (tag, attrs) => {
    const node = document.createElementNS(svgNS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    return node;
  };
  const num = (value) => (typeof value === "number" ? value : Number(value));
  const fmt = (value) => {
    if (value === null || value === undefined) return "";
    if (typeof value === "string") return value;
    if (typeof value === "boolean") return value ? "true" : "false";
    if (Number.isInteger(value)) return String(value);
    const magnitude = Math.abs(value);
    return magnitude !== 0 && (magnitude < 1e-3 || magnitude >= 1e5) ? value.toExponential(3) : value.toFixed(4);
  };
  const rows = Math.max(1, ...episodes.map((episode) => episode.steps.length));
  let step = Math.min(Math.max(options.step || 0, 0), rows - 1);
  let timer = null;

  root.classList.add("rlmesh-player");
  root.replaceChildren();
  const controls = make("div", { class: "rp-controls" });
  const playButton = make("button", { type: "button", "data-role": "play", title: "play / pause (space)" }, "▶");
  const slider = make("input", {
    type: "range", min: "0", max: String(rows - 1), value: String(step), step: "1", "data-role": "slider",
  });
  const position = make("span", { class: "rp-position", "data-role": "position" });
  const speed = make("select", { "data-role": "speed", title: "playback speed" });
  for (const factor of [0.25, 0.5, 1, 2, 4]) {
    const option = make("option", { value: String(factor) }, `${factor}x`);
    if (factor === 1) option.selected = true;
    speed.appendChild(option);
  }
  controls.append(playButton, slider, position, speed);
  const panelsBox = make("div", { class: "rp-panels" });
  root.append(controls, panelsBox);

  const panels = episodes.map((episode, index) => buildPanel(episode, index));

  function buildPanel(episode, index) {
    const panel = make("div", { class: "rp-panel", "data-episode": String(index) });
    panelsBox.appendChild(panel);
    panel.appendChild(make("div", { class: "rp-title", "data-role": "title" }, episode.title));
    const body = make("div", { class: "rp-body" });
    panel.appendChild(body);
    let frame = null;
    if (episode.frames) {
      const box = make("div", { class: "rp-frame" });
      frame = make("img", { "data-role": "frame", alt: "rendered frame" });
      box.appendChild(frame);
      body.appendChild(box);
    } else if (episode.no_frames) {
      const box = make("div", { class: "rp-frame rp-no-frames" });
      box.appendChild(make("div", { class: "rp-note", "data-role": "no-frames" }, episode.no_frames));
      body.appendChild(box);
    }
    const side = make("div", { class: "rp-side" });
    body.appendChild(side);
    const table = make("table", { class: "rp-values" });
    const cells = {};
    for (const [role, label] of [
      ["step", "step"], ["reward", "reward"], ["return", "return"], ["flags", "flags"], ["frame-step", "frame of step"],
    ]) {
      if (role === "frame-step" && !episode.frames) continue;
      const row = make("tr");
      row.append(make("th", {}, label));
      cells[role] = make("td", { "data-role": role });
      row.append(cells[role]);
      table.appendChild(row);
    }
    side.appendChild(table);
    const leafViews = [];
    for (const [group, leaves] of [["action", episode.action], ["observation", episode.observation]]) {
      const box = make("div", { class: "rp-leaves", "data-role": group });
      box.appendChild(make("div", { class: "rp-heading" }, group));
      if (!leaves) box.appendChild(make("div", { class: "rp-note" }, "not recorded"));
      for (const leaf of leaves || []) leafViews.push(buildLeaf(box, leaf));
      side.appendChild(box);
    }
    const chart = buildChart(panel, episode);
    return { episode, frame, cells, leafViews, chart, panel };
  }

  function buildLeaf(box, leaf) {
    const wrap = make("div", { class: "rp-leaf" });
    if (leaf.name) wrap.appendChild(make("span", { class: "rp-leaf-name" }, leaf.name + " "));
    box.appendChild(wrap);
    if (leaf.kind === "image") {
      const img = make("img", { class: "rp-obs-image", "data-role": "leaf-image" });
      wrap.appendChild(img);
      return (row) => { img.src = leaf.data[row]; };
    }
    if (leaf.kind === "text" || leaf.width === 1) {
      const span = make("span", { class: "rp-scalar", "data-role": "leaf-value" });
      wrap.appendChild(span);
      return (row) => { span.textContent = fmt(leaf.data[row * (leaf.width || 1)]); };
    }
    const shown = Math.min(leaf.width, leaf.shown);
    const grid = make("div", { class: "rp-grid" });
    const spans = [];
    for (let i = 0; i < shown; i++) {
      const item = make("span", { class: "rp-cell", title: `${leaf.name || ""}[${i}]` });
      spans.push(item);
      grid.appendChild(item);
    }
    wrap.appendChild(grid);
    if (shown < leaf.width) wrap.appendChild(make("div", { class: "rp-note" }, `first ${shown} of ${leaf.width} values`));
    return (row) => {
      const base = row * leaf.width;
      for (let i = 0; i < shown; i++) spans[i].textContent = fmt(leaf.data[base + i]);
    };
  }

  function buildChart(panel, episode) {
    // Return on the left axis, reward on the right (their scales differ), step along the bottom;
    // the reward line is drawn last so the return line never hides it.
    const width = 480, height = 150, left = 46, right = 46, top = 8, bottom = 28;
    const plotWidth = width - left - right, plotHeight = height - top - bottom;
    const svg = makeSvg("svg", { viewBox: `0 0 ${width} ${height}`, class: "rp-chart", "data-role": "chart" });
    const n = episode.steps.length;
    const xOf = (row) => left + (n > 1 ? (row / (n - 1)) * plotWidth : 0);
    const text = (x, y, label, attrs) => {
      const node = makeSvg("text", { x: String(x), y: String(y), class: "rp-axis-label", ...(attrs || {}) });
      node.textContent = label;
      svg.appendChild(node);
    };
    const axis = (values, side, cls, name) => {
      const numbers = values.map(num).filter(Number.isFinite);
      if (!numbers.length) return null;
      let low = Math.min(...numbers), high = Math.max(...numbers);
      if (low === high) { low -= 1; high += 1; }
      const yOf = (v) => top + plotHeight - ((v - low) / (high - low)) * plotHeight;
      const x = side === "left" ? left : left + plotWidth;
      const group = makeSvg("g", { "data-role": `${name}-axis` });
      svg.appendChild(group);
      group.appendChild(makeSvg("line", { x1: String(x), x2: String(x), y1: String(top), y2: String(top + plotHeight), class: `rp-axis ${cls}` }));
      const anchor = side === "left" ? "end" : "start", dx = side === "left" ? -4 : 4;
      for (const [value, y] of [[high, top + 4], [low, top + plotHeight]]) {
        const label = makeSvg("text", { x: String(x + dx), y: String(y), "text-anchor": anchor, class: `rp-axis-label ${cls}` });
        label.textContent = fmt(value);
        group.appendChild(label);
      }
      const title = makeSvg("text", {
        x: String(x + dx), y: String(top + plotHeight / 2), "text-anchor": anchor, class: `rp-axis-title ${cls}`,
      });
      title.textContent = name;
      group.appendChild(title);
      return yOf;
    };
    const line = (values, yOf, cls) => {
      if (!yOf) return;
      const points = values.map((v, row) => (Number.isFinite(num(v)) ? `${xOf(row).toFixed(1)},${yOf(num(v)).toFixed(1)}` : null))
        .filter((p) => p !== null).join(" ");
      svg.appendChild(makeSvg("polyline", { points, class: cls, fill: "none" }));
    };
    const returnY = axis(episode.returns, "left", "rp-return", "return");
    const rewardY = axis(episode.rewards, "right", "rp-reward", "reward");
    const xAxis = makeSvg("g", { "data-role": "x-axis" });
    svg.appendChild(xAxis);
    xAxis.appendChild(makeSvg("line", {
      x1: String(left), x2: String(left + plotWidth), y1: String(top + plotHeight), y2: String(top + plotHeight), class: "rp-axis",
    }));
    if (n) {
      for (const [row, anchor] of [[0, "start"], [n - 1, "end"]]) {
        const label = makeSvg("text", { x: xOf(row).toFixed(1), y: String(height - 14), "text-anchor": anchor, class: "rp-axis-label" });
        label.textContent = String(episode.steps[row] + 1);
        xAxis.appendChild(label);
      }
    }
    const title = makeSvg("text", { x: String(left + plotWidth / 2), y: String(height - 2), "text-anchor": "middle", class: "rp-axis-title" });
    title.textContent = "step";
    xAxis.appendChild(title);
    line(episode.returns, returnY, "rp-return-line");
    line(episode.rewards, rewardY, "rp-reward-line");
    const cursor = makeSvg("line", { y1: String(top), y2: String(top + plotHeight), class: "rp-cursor", "data-role": "cursor" });
    svg.appendChild(cursor);
    const legend = make("div", { class: "rp-legend" });
    legend.innerHTML = '<span class="rp-key-return">return (left axis)</span> <span class="rp-key-reward">reward (right axis)</span>';
    panel.append(svg, legend);
    svg.addEventListener("click", (event) => {
      const box = svg.getBoundingClientRect();
      const x = ((event.clientX - box.left) / box.width) * width;
      const row = Math.round(((x - left) / plotWidth) * (n - 1));
      setStep(Math.min(Math.max(row, 0), rows - 1), true);
    });
    return { move: (row) => { const x = xOf(row).toFixed(1); cursor.setAttribute("x1", x); cursor.setAttribute("x2", x); } };
  }

  function render() {
    slider.value = String(step);
    // "step k of n" as the panel says it: the episode's own steps when there is one episode.
    const only = episodes.length === 1 && episodes[0].steps.length ? episodes[0] : null;
    position.textContent = only
      ? `step ${only.steps[Math.min(step, only.steps.length - 1)] + 1} of ${only.length}`
      : `step ${step + 1} of ${rows}`;
    for (const view of panels) {
      const episode = view.episode;
      const n = episode.steps.length;
      view.panel.classList.toggle("rp-ended", step >= n);
      if (!n) { view.cells.step.textContent = "no recorded steps"; continue; }
      const row = Math.min(step, n - 1);
      view.cells.step.textContent = `${episode.steps[row] + 1} of ${episode.length}` + (step >= n ? " (episode over)" : "");
      view.cells.reward.textContent = fmt(episode.rewards[row]);
      view.cells.return.textContent = fmt(episode.returns[row]);
      const flags = [];
      if (episode.terminated[row]) flags.push("terminated");
      if (episode.truncated[row]) flags.push("truncated");
      view.cells.flags.textContent = flags.length ? flags.join(", ") : "-";
      if (view.frame) {
        const index = episode.frame_index[row];
        if (index >= 0) {
          view.frame.src = episode.frames[index];
          view.cells["frame-step"].textContent = String(episode.frame_steps[index]);
        } else {
          view.frame.removeAttribute("src");
          view.cells["frame-step"].textContent = "none yet";
        }
      }
      for (const update of view.leafViews) update(row);
      view.chart.move(row);
    }
  }

  function setStep(value, fromUser) {
    const next = Math.min(Math.max(Math.round(Number(value)) || 0, 0), rows - 1);
    if (next === step && !fromUser) return;
    step = next;
    render();
    if (fromUser && options.onStep) options.onStep(step);
  }

  function setPlaying(on, fromUser) {
    if (on && !timer) {
      if (step >= rows - 1) setStep(0, true);
      const fps = (options.fps || 30) * Number(speed.value);
      timer = setInterval(() => {
        if (step >= rows - 1) { setPlaying(false, true); return; }
        setStep(step + 1, true);
      }, 1000 / fps);
    } else if (!on && timer) {
      clearInterval(timer);
      timer = null;
    } else {
      return;
    }
    playButton.textContent = timer ? "❚❚" : "▶";
    root.dataset.playing = timer ? "true" : "false";
    if (fromUser && options.onPlaying) options.onPlaying(Boolean(timer));
  }

  slider.addEventListener("input", () => setStep(slider.value, true));
  playButton.addEventListener("click", () => setPlaying(!timer, true));
  speed.addEventListener("change", () => { if (timer) { setPlaying(false, false); setPlaying(true, false); } });
  root.tabIndex = 0;
  root.addEventListener("keydown", (event) => {
    if (event.target === speed || event.target === playButton) return; // their own keys (space clicks the button)
    if (event.key === " ") { event.preventDefault(); setPlaying(!timer, true); }
    else if (event.key === "ArrowRight" && event.target !== slider) setStep(step + 1, true);
    else if (event.key === "ArrowLeft" && event.target !== slider) setStep(step - 1, true);
  });
  render();
  root.dataset.playing = "false";
  return {
    setStep: (value) => setStep(value, false),
    setPlaying: (on) => setPlaying(on, false),
    step: () => step,
    destroy: () => { if (timer) clearInterval(timer); timer = null; },
  };
}
