"""The app's saved settings: which backend new ComputerSessions use, kept in the user's config dir as JSON.

A settings file is user-editable and may be anything: unreadable, half-written, hand-edited into nonsense. None of
that may keep the app from starting, so a file that does not hold valid settings gives the defaults and a notice
the console shows; the file is rewritten only when the user changes a setting. Writes go to a temporary file that
replaces the old one, so a crash mid-write never leaves a corrupt file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from runtime.assembly import installed_backends

BACKENDS = installed_backends()
"""The backends the settings may name (the installed ones), in the order the console lists them; the first is the
default."""

FILE_NAME = "settings.json"
MAX_FILE_BYTES = 64 * 1024


def default_config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CONFIG_HOME/computer-use`, or `~/.config/computer-use` (the XDG base directory default)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME", "")
    # The XDG spec: a relative path in XDG_CONFIG_HOME is invalid and must be ignored.
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "computer-use"


@dataclass(frozen=True)
class HostSettings:
    backend: str = BACKENDS[0]


class InvalidSetting(ValueError):
    """A setting value the app cannot use; the message says which values it can."""


def validate(backend: object, allowed: Sequence[str] = BACKENDS) -> str:
    if not isinstance(backend, str) or backend not in allowed:
        shown = repr(backend)[:60]
        raise InvalidSetting(f"unknown backend {shown}; choose one of {', '.join(allowed)}")
    return backend


class SettingsStore:
    """The settings file of one config dir."""

    def __init__(self, config_dir: Path, allowed: Sequence[str] = BACKENDS) -> None:
        self.path = config_dir / FILE_NAME
        self.allowed = tuple(allowed)

    def load(self) -> tuple[HostSettings, str | None]:
        """The saved settings, or the defaults and a notice saying why the file could not be used."""
        try:
            with self.path.open("rb") as file:
                raw = file.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return HostSettings(), None
        except OSError as exc:
            return HostSettings(), self._notice(f"it could not be read ({exc.strerror})")
        if len(raw) > MAX_FILE_BYTES:
            return HostSettings(), self._notice(f"it is larger than {MAX_FILE_BYTES} bytes")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return HostSettings(), self._notice("it is not valid JSON")
        if not isinstance(data, dict):
            return HostSettings(), self._notice("it does not hold a JSON object")
        try:
            backend = validate(data.get("backend", HostSettings.backend), self.allowed)
        except InvalidSetting as exc:
            return HostSettings(), self._notice(str(exc))
        return HostSettings(backend=backend), None

    def save(self, settings: HostSettings) -> None:
        validate(settings.backend, self.allowed)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".settings-", suffix=".json", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                json.dump({"backend": settings.backend}, file, indent=2)
                file.write("\n")
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def _notice(self, why: str) -> str:
        return f"The settings file {self.path} was not used because {why}; the defaults apply until a setting changes."
