"""Where gg keeps its settings on an operator's machine, and the order they win in.

Precedence, highest first: a command-line flag (``--server``), the environment
(``GG_SERVER``, ``GG_TOKEN``), then the config file written by ``gg login`` in the
platformdirs config directory (``GG_CONFIG_DIR`` overrides; the file is mode 0600 since it
holds a token). The runner's state lives apart, in ``GG_STATE_DIR`` (default: the
platformdirs state directory), so one machine can sign in and run runners separately.

Each directory is made absolute when it is resolved, once, at a command's start: a relative
``GG_STATE_DIR`` means the folder it was started in, whatever the process does later, and
is recorded (and hidden from flights) as that absolute path (:mod:`gg.trees`).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

ENV_SERVER = "GG_SERVER"
ENV_TOKEN = "GG_TOKEN"
ENV_CONFIG_DIR = "GG_CONFIG_DIR"
ENV_STATE_DIR = "GG_STATE_DIR"
ENV_DATA_DIR = "GG_DATA_DIR"
ENV_IMAGES_DIR = "GG_IMAGES_DIR"  # pool images built on this host (gg strategy build, maintain)
ENV_MEMBER_CODE = "GG_MEMBER_CODE"  # a pool member's one-time code, set by its maintainer


@dataclass
class Config:
    server: str | None = None
    token: str | None = None
    person: str | None = None


def absolute(path: Path | str) -> Path:
    """``path`` made absolute against the folder this process started in."""
    return Path(os.path.abspath(os.path.expanduser(path)))


def config_dir() -> Path:
    if os.environ.get(ENV_CONFIG_DIR):
        return absolute(os.environ[ENV_CONFIG_DIR])
    import platformdirs

    return Path(platformdirs.user_config_dir("gg"))


def state_dir() -> Path:
    if os.environ.get(ENV_STATE_DIR):
        return absolute(os.environ[ENV_STATE_DIR])
    import platformdirs

    return Path(platformdirs.user_state_dir("gg")) / "runner"


def data_dir() -> Path:
    if os.environ.get(ENV_DATA_DIR):
        return absolute(os.environ[ENV_DATA_DIR])
    import platformdirs

    return Path(platformdirs.user_data_dir("gg")) / "server"


def images_dir() -> Path:
    """Where this host keeps pool images: ``gg strategy build`` writes them and
    ``gg runner maintain`` unpacks members from them."""
    if os.environ.get(ENV_IMAGES_DIR):
        return absolute(os.environ[ENV_IMAGES_DIR])
    import platformdirs

    return Path(platformdirs.user_data_dir("gg")) / "images"


def config_path() -> Path:
    return config_dir() / "config.json"


def load() -> Config:
    try:
        data = json.loads(config_path().read_text())
        return Config(**{k: data.get(k) for k in ("server", "token", "person")})
    except FileNotFoundError:
        return Config()
    except (ValueError, TypeError):
        raise ValueError(f"the config file {config_path()} is not valid JSON; "
                         "sign in again with gg login") from None


def save(config: Config, path: Path | None = None) -> Path:
    """Write ``config`` (mode 0600) to ``path``, by default this machine's config file."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(asdict(config), fh)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    from gg import trees

    trees.record(path.parent)  # a token lives here: every runner's flights must not see it
    return path


def forget_token() -> Path | None:
    """``gg logout``: drop the token (and whose it was) from the config file, keeping the
    server chosen; the file is removed when nothing is left in it. None if there was none."""
    path = config_path()
    if not path.exists():
        return None
    config = load()
    config.token, config.person = None, None
    if config.server is None:
        path.unlink()
        return path
    return save(config)


def resolve_server(flag: str | None, config: Config) -> str | None:
    return flag or os.environ.get(ENV_SERVER) or config.server


def resolve_token(config: Config) -> str | None:
    return os.environ.get(ENV_TOKEN) or config.token
