"""A deterministic reference policy for the judge rollout: no model, no API key.

It answers like a model that knows the formula: it reads the Celsius value from the
user's prompt and replies with the working and the Fahrenheit value. Pass it to the
plugin with ``--osmosis-policy rollouts/judge/policy.py:policy``.
"""

from __future__ import annotations

import re

from osmosis_rollout.policy import ChatRequest

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def policy(request: ChatRequest) -> str:
    """Convert the prompt's Celsius value to Fahrenheit, showing the working."""
    numbers = _NUMBER.findall(request.last_user_message or "")
    if not numbers:
        return "Please give me a temperature in degrees Celsius."
    celsius = float(numbers[0])
    fahrenheit = round(celsius * 9 / 5 + 32, 2)
    return (
        f"Multiply by 9/5 and add 32: {celsius:g} x 9/5 + 32 = {fahrenheit:g}. "
        f"So {celsius:g} degrees Celsius is {fahrenheit:g} degrees Fahrenheit."
    )
