"""Fixtures shared by the task tests."""

from absl import logging
import pytest


@pytest.fixture
def logged_info(monkeypatch):
  """The absl `logging.info` messages of the test, formatted.

  caplog misses them once absl has installed its own handler (as other tests in the same
  process do), so the call itself is recorded.
  """
  messages = []
  monkeypatch.setattr(logging, "info", lambda message, *args: messages.append(message % args))
  return messages
