"""The recipes shipped with actors (JSON files beside this module, scripts in scripts/)."""

from pathlib import Path

SHIPPED_DIR = Path(__file__).resolve().parent

__all__ = ["SHIPPED_DIR"]
