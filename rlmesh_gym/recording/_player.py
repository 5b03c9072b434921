"""The episode player widget for Jupyter: :class:`EpisodePlayer` and :func:`play`.

An anywidget: the episodes' data (:mod:`._player_data`) is sent to the browser once, when the
widget is shown, and ``player.js`` renders every step there. Only the slider position
(``step``) and the play state (``playing``) are synced back, so Python always knows where the
user is (:attr:`EpisodePlayer.current`) without re-rendering anything per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

from rlmesh_gym.recording._player_data import DEFAULT_FPS, check_episodes, episode_payload, step_values
from rlmesh_gym.recording._reader import RecordedEpisode

__all__ = ["play", "player_css", "player_script"]  # and EpisodePlayer, built on first use


@cache
def player_script() -> str:
    """The player's JavaScript (defines ``rlmeshMountPlayer``)."""
    return resources.files("rlmesh_gym.recording").joinpath("player_assets/player.js").read_text("utf-8")


@cache
def player_css() -> str:
    """The player's stylesheet."""
    return resources.files("rlmesh_gym.recording").joinpath("player_assets/player.css").read_text("utf-8")


_WIDGET_GLUE = """
export default {
  render({ model, el }) {
    const player = rlmeshMountPlayer(el, model.get("episodes"), {
      step: model.get("step"),
      fps: model.get("fps"),
      onStep: (step) => { model.set("step", step); model.save_changes(); },
      onPlaying: (playing) => { model.set("playing", playing); model.save_changes(); },
    });
    const onStep = () => player.setStep(model.get("step"));
    const onPlaying = () => player.setPlaying(model.get("playing"));
    model.on("change:step", onStep);
    model.on("change:playing", onPlaying);
    return () => {
      model.off("change:step", onStep);
      model.off("change:playing", onPlaying);
      player.destroy();
    };
  },
};
"""


def _anywidget() -> Any:
    try:
        import anywidget
        import traitlets
    except ImportError as exc:
        raise ImportError(
            "the episode player needs anywidget (Jupyter widgets): pip install 'rlmesh-gym[notebook]'"
        ) from exc
    return anywidget, traitlets


@cache
def _player_class() -> type:
    anywidget, traitlets = _anywidget()
    widget_base: Any = anywidget.AnyWidget  # imported on first use: a variable, so typed Any

    class EpisodePlayer(widget_base):
        """Plays recorded episodes side by side with one slider (see :func:`play`)."""

        _esm = traitlets.Unicode(player_script() + _WIDGET_GLUE).tag(sync=True)
        _css = traitlets.Unicode(player_css()).tag(sync=True)
        episodes = traitlets.List().tag(sync=True)
        step = traitlets.Int(0).tag(sync=True)
        playing = traitlets.Bool(False).tag(sync=True)
        fps = traitlets.Float(DEFAULT_FPS).tag(sync=True)

        def __init__(
            self, episodes: Sequence[RecordedEpisode], labels: Sequence[str] | None, fps: float
        ) -> None:
            self._episodes = list(episodes)
            payloads = [
                episode_payload(episode, label=None if labels is None else labels[index])
                for index, episode in enumerate(self._episodes)
            ]
            super().__init__(episodes=payloads, fps=fps)

        @property
        def rows(self) -> int:
            """Slider positions: the most recorded steps of any episode shown."""
            return max(len(episode.steps) for episode in self._episodes)

        @traitlets.validate("step")
        def _check_step(self, proposal: Any) -> int:
            value = proposal["value"]
            if not 0 <= value < max(self.rows, 1):
                raise traitlets.TraitError(
                    f"step {value} is out of range: the player has {self.rows} position(s)"
                )
            return value

        @property
        def current(self) -> list[dict[str, Any]]:
            """What each panel shows at the slider's position: step, reward, return, flags, action,
            observation and the step of the frame shown (one dict per episode, in panel order)."""
            return [step_values(episode, self.step) for episode in self._episodes]

    EpisodePlayer.__qualname__ = "EpisodePlayer"  # defined in a function only to import anywidget late
    return EpisodePlayer


def __getattr__(name: str) -> Any:
    # EpisodePlayer subclasses anywidget.AnyWidget, built on first use so that importing
    # rlmesh_gym.recording does not need (or load) the notebook extra.
    if name == "EpisodePlayer":
        return _player_class()
    raise AttributeError(name)


def play(*episodes: RecordedEpisode, labels: Sequence[str] | None = None, fps: float | None = None) -> Any:
    """An interactive player of one or more episodes, side by side with one slider.

    Args:
        episodes: the episodes to show (for instance the same seed under two policies, from
            two recordings); the slider runs over the longest one's recorded steps, and a
            shorter one stays on its last step.
        labels: a heading per episode (for example ``("trained", "random")``).
        fps: playback speed in steps per second (default: 30).

    Returns:
        An ``EpisodePlayer`` widget: display it in Jupyter; its ``step`` is the slider
        position and ``current`` what each panel shows there.

    Example (in a notebook, with two loaded recordings)::

        play(trained.episode(0), random.episode(0), labels=("trained", "random"))
    """
    chosen = check_episodes(episodes)
    if labels is not None:
        labels = [str(label) for label in labels]
        if len(labels) != len(chosen):
            raise ValueError(f"play got {len(labels)} label(s) for {len(chosen)} episode(s)")
    if fps is None:
        fps = next((e.render_fps for e in chosen if e.render_fps is not None), DEFAULT_FPS)
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps > 0:
        raise ValueError(f"fps must be a number > 0, got {fps!r}")
    return _player_class()(chosen, labels, float(fps))
