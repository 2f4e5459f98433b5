"""Replay memory: the AlphaZero episode buffer and a plain uniform ring buffer.

Both hold any pytree and are factories of pure, jit-able functions with explicit state.
"""

from turbozero.memory.episode import (
    EpisodeBuffer,
    EpisodeBufferState,
    EpisodeSample,
    make_episode_buffer,
)
from turbozero.memory.uniform import UniformBuffer, UniformBufferState, make_uniform_buffer

__all__ = [
    "EpisodeBuffer",
    "EpisodeBufferState",
    "EpisodeSample",
    "UniformBuffer",
    "UniformBufferState",
    "make_episode_buffer",
    "make_uniform_buffer",
]
