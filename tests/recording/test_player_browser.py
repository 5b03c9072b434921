"""The exported HTML page in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven through Selenium. Nothing is downloaded at test time.

Without chromium the test is skipped locally; in CI (``CI=true``, set by ``.ci/run``, which
installs chromium) a missing browser fails it.
"""

from __future__ import annotations

import io
import os
import shutil

import numpy as np
import pytest

from rlmesh_gym.recording import load_recording

pytestmark = [pytest.mark.selenium, pytest.mark.timeout(180)]


def _browser_paths() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium and driver:
        return chromium, driver
    missing = "chromium" if not chromium else "chromedriver (Debian package chromium-driver)"
    message = f"{missing} is not installed: apt-get install -y chromium chromium-driver"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the browser test needs a browser in CI: {message}")
    pytest.skip(message)


@pytest.fixture
def browser():
    chromium, driver_path = _browser_paths()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1200,1100",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _text(driver, selector: str) -> str:
    return driver.find_element("css selector", selector).text


def test_the_exported_page_lists_episodes_and_plays_one(browser, cartpole_recording, tmp_path):
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    recording = load_recording(cartpole_recording[0])
    page = recording.to_html(tmp_path / "run.html")
    browser.get(f"file://{page}")

    rows = browser.find_elements("css selector", "table.episodes tbody tr")
    assert [row.find_elements("tag name", "td")[2].text for row in rows] == [
        episode.episode_id for episode in recording.episodes
    ]

    # An episode without frames: the player shows its data and no frame panel.
    no_frames = next(i for i, e in enumerate(recording.episodes) if e.frames is None)
    rows[no_frames].click()
    assert browser.find_elements("css selector", "#player [data-role=frame]") == []
    assert _text(browser, "#player [data-role=no-frames]") == (
        f"No frames: frames were recorded on lane(s) 0 only, and this episode ran on lane "
        f"{recording.episodes[no_frames].lane}."
    )
    assert _text(browser, "#player [data-role=reward]") == "1"

    # An episode with frames: the slider and play change the step, reward, return and frame.
    index = next(i for i, e in enumerate(recording.episodes) if e.frames is not None)
    episode = recording.episodes[index]
    rows[index].click()
    assert browser.find_element("css selector", "#player").get_attribute("data-episode") == str(index)
    frame = browser.find_element("css selector", "#player [data-role=frame]")
    first_src = frame.get_attribute("src")
    assert first_src.startswith("data:image/jpeg;base64,")
    assert _text(browser, "#player [data-role=step]") == f"1 of {episode.length}"
    assert _text(browser, "#player [data-role=position]") == f"step 1 of {episode.length}"
    assert _text(browser, "#player [data-role=return]") == "1"

    slider = browser.find_element("css selector", "#player [data-role=slider]")
    slider.click()  # focus; a click may move the thumb, so go back to the start with Home
    slider.send_keys(Keys.HOME)
    for _ in range(5):
        slider.send_keys(Keys.ARROW_RIGHT)
    assert slider.get_attribute("value") == "5"
    assert _text(browser, "#player [data-role=step]") == f"6 of {episode.length}"
    assert _text(browser, "#player [data-role=position]") == f"step 6 of {episode.length}"
    assert _text(browser, "#player [data-role=return]") == "6"
    assert _text(browser, "#player [data-role=frame-step]") == "5"
    fifth_src = frame.get_attribute("src")
    assert fifth_src != first_src
    cursor_x = browser.find_element("css selector", "#player [data-role=cursor]").get_attribute("x1")

    browser.find_element("css selector", "#player [data-role=play]").click()
    assert browser.find_element("css selector", "#player").get_attribute("data-playing") == "true"
    last = len(episode.steps) - 1
    WebDriverWait(browser, 20).until(
        lambda d: (
            d.find_element("css selector", "#player [data-role=slider]").get_attribute("value") == str(last)
        )
    )
    WebDriverWait(browser, 5).until(
        lambda d: d.find_element("css selector", "#player").get_attribute("data-playing") == "false"
    )  # it stops at the episode's end
    assert _text(browser, "#player [data-role=step]") == f"{last + 1} of {episode.length}"
    assert _text(browser, "#player [data-role=position]") == f"step {last + 1} of {episode.length}"
    assert _text(browser, "#player [data-role=return]") == f"{episode.episode_return:g}"
    assert _text(browser, "#player [data-role=flags]") == "terminated"
    assert frame.get_attribute("src") not in (first_src, fifth_src)
    assert browser.find_element("css selector", "#player [data-role=cursor]").get_attribute("x1") != cursor_x

    screenshot = tmp_path / "player.png"
    assert browser.save_screenshot(str(screenshot))
    from PIL import Image

    with Image.open(io.BytesIO(screenshot.read_bytes())) as image:
        pixels = np.asarray(image.convert("RGB"))
    assert pixels.shape[0] > 200 and pixels.shape[1] > 200
    # Not blank: many colours (text, table, histogram bars, the frame) and a real spread of values.
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50
    assert pixels.std() > 20


def test_the_notebook_widget_renders_and_syncs_its_step(browser, cartpole_recording, tmp_path):
    """The widget's own ES module (what anywidget loads in JupyterLab and Notebook), rendered
    with a stand-in for anywidget's model: a slider move is saved to the model's ``step``, and
    a ``step`` set from Python moves the slider."""
    import base64
    import json

    from selenium.webdriver.common.keys import Keys

    recording = load_recording(cartpole_recording[0])
    index = next(i for i, e in enumerate(recording.episodes) if e.frames is not None)
    episode = recording.episodes[index]
    state = recording.play(index).get_state()
    module = base64.b64encode(state["_esm"].encode()).decode()
    synced = {name: state[name] for name in ("episodes", "step", "fps", "playing")}
    page = tmp_path / "widget.html"
    page.write_text(
        f"""<!DOCTYPE html><html><head><meta charset="utf-8"><style>{state["_css"]}</style></head><body>
<div id="widget"></div>
<script type="application/json" id="state">{json.dumps(synced)}</script>
<script type="module">
const values = JSON.parse(document.getElementById("state").textContent);
const listeners = {{}};
window.saved = [];
const model = {{
  get: (name) => values[name],
  set: (name, value) => {{ values[name] = value; }},
  save_changes: () => window.saved.push({{ step: values.step, playing: values.playing }}),
  on: (event, callback) => {{ (listeners[event] = listeners[event] || []).push(callback); }},
  off: (event, callback) => {{ listeners[event] = (listeners[event] || []).filter((c) => c !== callback); }},
}};
window.pythonSetsStep = (step) => {{
  values.step = step;
  (listeners["change:step"] || []).forEach((c) => c());
}};
const widget = await import("data:text/javascript;base64,{module}");
widget.default.render({{ model, el: document.getElementById("widget") }});
window.rendered = true;
</script></body></html>""",
        encoding="utf-8",
    )
    browser.get(f"file://{page}")
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 10).until(lambda d: d.execute_script("return window.rendered === true"))
    assert browser.find_element("css selector", "#widget [data-role=frame]").get_attribute("src")
    slider = browser.find_element("css selector", "#widget [data-role=slider]")
    slider.click()
    slider.send_keys(Keys.HOME)
    for _ in range(3):
        slider.send_keys(Keys.ARROW_RIGHT)
    assert browser.execute_script("return window.saved.at(-1)") == {"step": 3, "playing": False}
    assert _text(browser, "#widget [data-role=step]") == f"4 of {episode.length}"
    browser.execute_script("window.pythonSetsStep(7)")
    assert slider.get_attribute("value") == "7"
    assert _text(browser, "#widget [data-role=return]") == f"{episode.rewards[:8].sum():g}"


def test_cli_recorded_frames_show_in_the_page_and_a_lane_without_them_says_why(browser, tmp_path):
    from rlmesh_gym.cli import main

    record, page = tmp_path / "run.rec", tmp_path / "run.html"
    argv = ["eval", "CartPole-v1", "--policy", "random", "--episodes", "2", "--num-envs", "2",
            "--autoreset", "disabled", "--record", str(record), "--frame-lanes", "0", "--frame-stride", "2",
            "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    assert main(["episodes", str(record), "--html", str(page)]) == 0
    recording = load_recording(record)
    assert recording.header.options["frame_lanes"] == [0] and recording.header.options["frame_stride"] == 2
    browser.get(f"file://{page}")
    rows = browser.find_elements("css selector", "table.episodes tbody tr")
    with_frames = next(i for i, e in enumerate(recording.episodes) if e.lane == 0)
    rows[with_frames].click()
    frame = browser.find_element("css selector", "#player [data-role=frame]")
    assert frame.is_displayed()
    # The image decoded: the browser knows its size (CartPole renders 600 x 400).
    size = browser.execute_script("const f = arguments[0]; return [f.naturalWidth, f.naturalHeight];", frame)
    assert size == [600, 400]
    assert frame.size["width"] > 100 and frame.size["height"] > 60  # laid out, not collapsed
    without = next(i for i, e in enumerate(recording.episodes) if e.lane == 1)
    rows[without].click()
    assert browser.find_elements("css selector", "#player [data-role=frame]") == []
    reason = browser.find_element("css selector", "#player [data-role=no-frames]")
    assert reason.is_displayed()
    assert reason.text == "No frames: frames were recorded on lane(s) 0 only, and this episode ran on lane 1."


def test_the_chart_has_a_scale_on_both_axes_and_the_reward_line_on_top(browser, cartpole_recording, tmp_path):
    recording = load_recording(cartpole_recording[0])
    episode = recording.episodes[0]
    browser.get(f"file://{recording.to_html(tmp_path / 'run.html')}")
    chart = browser.find_element("css selector", "#player [data-role=chart]")
    labels = {
        role: [node.text for node in chart.find_elements("css selector", f"[data-role={role}-axis] text")]
        for role in ("return", "reward", "x")
    }
    # CartPole's reward is 1 every step and its return climbs from 1 to the episode's return.
    assert labels["return"] == [f"{episode.episode_return:g}", "1", "return"]
    assert labels["reward"] == ["2", "0", "reward"]  # a constant reward gets a scale of +-1 around it
    assert labels["x"] == ["1", str(episode.length), "step"]
    lines = [node.get_attribute("class") for node in chart.find_elements("css selector", "polyline")]
    assert lines == ["rp-return-line", "rp-reward-line"]  # drawn last, so on top
    reward = chart.find_element("css selector", ".rp-reward-line")
    assert (
        browser.execute_script("return getComputedStyle(arguments[0]).stroke", reward) == "rgb(255, 127, 14)"
    )
