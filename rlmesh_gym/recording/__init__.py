"""Episode recording: a runtime hook that writes episodes to a msgpack file, and its reader; and
``EpisodeRecord``, the summary of one finished episode that recordings and evaluation results share.

>>> from rlmesh_gym import evaluate
>>> from rlmesh_gym.recording import RecordingOptions, load_recording, replay_episode
>>> result = evaluate("CartPole-v1", "random", episodes=4, autoreset="disabled", seed=0,
...                   progress=False, record=RecordingOptions("run.rec", lanes=[0]))
>>> recording = load_recording("run.rec")
>>> replay_episode(recording, 0).match
True

The file format, what a step record holds in each autoreset mode, and the options are
described in ``docs/recording.md``.
"""

from rlmesh_gym.recording._format import FORMAT_VERSION, RecordingFormatError
from rlmesh_gym.recording._options import RecordingOptions
from rlmesh_gym.recording._player import play
from rlmesh_gym.recording._reader import (
    RecordedEpisode,
    Recording,
    RecordingHeader,
    RecordingWarning,
    load_recording,
)
from rlmesh_gym.recording._recorder import EpisodeRecorder
from rlmesh_gym.recording._replay import ReplayDivergence, ReplayResult, replay_episode
from rlmesh_gym.recording.episode_record import EpisodeRecord

__all__ = [
    "FORMAT_VERSION",
    "EpisodeRecord",
    "EpisodeRecorder",
    "RecordedEpisode",
    "Recording",
    "RecordingFormatError",
    "RecordingHeader",
    "RecordingOptions",
    "RecordingWarning",
    "ReplayDivergence",
    "ReplayResult",
    "load_recording",
    "play",
    "replay_episode",
]
