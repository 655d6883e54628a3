"""Imported by ``main.py`` as a sibling module: present on the cluster only if shipped."""

from __future__ import annotations


def grade_answer(answer: str, label: str | None) -> float:
    """1.0 when the label appears in the answer."""
    return 1.0 if label and label in answer else 0.0
