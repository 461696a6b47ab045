"""Settings from config files, as a user keeps them: the real CLI in a
subprocess, real files in a temp repository and a temp user config folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHOP, make_git_repo
from test_mcp_server import call_once

CTX04 = str(Path(sys.executable).parent / "ctx04")
TASK = "Cart.total() rounds the discounted subtotal wrongly"


def ctx04(*args: str, config_home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CTX04, *args], capture_output=True, text=True, check=False,
        env={**os.environ, "XDG_CONFIG_HOME": str(config_home), **env},
    )


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "shop", SHOP).resolve()


@pytest.fixture
def config_home(tmp_path: Path) -> Path:
    """XDG_CONFIG_HOME, whose ctx04/config.toml is the user file on Linux."""
    (tmp_path / "xdg" / "ctx04").mkdir(parents=True)
    return tmp_path / "xdg"


def user_file(config_home: Path, text: str) -> Path:
    path = config_home / "ctx04" / "config.toml"
    path.write_text(text)
    return path


def test_each_layer_outranks_the_one_below(shop: Path, config_home: Path) -> None:
    """command line > environment > repository file > user file > defaults."""
    user_file(config_home, (
        "budget_tokens = 3000\ntop_k = 15\npath_boost = 0.5\n"
        "model = \"from-user-file\"\ndisable = [\"history\"]\n"
    ))
    (shop / "ctx04.toml").write_text("budget_tokens = 2500\ntop_k = 12\nfusion = \"learned\"\n")
    done = ctx04(
        "retrieve", TASK, "--repo", str(shop), "--format", "json", "--set", "top_k=9",
        config_home=config_home, CTX04_FUSION="weighted",
    )
    assert done.returncode == 0, done.stderr
    diagnostics = json.loads(done.stdout)["diagnostics"]
    settings = diagnostics["settings"]
    assert settings["top_k"] == 9  # command line
    assert settings["fusion"] == "weighted"  # environment
    assert settings["budget_tokens"] == 2500  # repository file
    assert (settings["path_boost"], settings["model"]) == (0.5, "from-user-file")  # user file
    assert settings["identifier_weight"] == 3.0  # default
    assert "history" not in diagnostics["plugins"]
    assert "ripgrep" in diagnostics["plugins"]


def test_config_prints_each_value_and_its_source(shop: Path, config_home: Path) -> None:
    user = user_file(config_home, "budget_tokens = 3000\ntop_k = 15\ndisable = [\"history\"]\n")
    (shop / "pyproject.toml").write_text(
        "[project]\nname = \"shop\"\n\n[tool.ctx04]\nbudget_tokens = 2500\n"
        "exclude_globs = [\"vendor/**\", \"*.min.js\"]\n"
    )
    done = ctx04(
        "config", "--repo", str(shop), config_home=config_home, CTX04_FUSION="weighted"
    )
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    repository = f"repository file {shop / 'pyproject.toml'} [tool.ctx04]"
    assert lines[0] == f"# user file: {user}"
    assert f"budget_tokens = 2500  # {repository}" in lines
    assert f'exclude_globs = ["vendor/**", "*.min.js"]  # {repository}' in lines
    assert f"top_k = 15  # user file {user}" in lines
    assert 'fusion = "weighted"  # environment CTX04_FUSION' in lines
    assert f'disable = ["history"]  # user file {user}' in lines
    assert "identifier_weight = 3.0  # default" in lines
    assert 'whole_body_max_lines = "none"  # default' in lines


def test_ctx04_toml_is_read_before_pyproject(shop: Path, config_home: Path) -> None:
    (shop / "pyproject.toml").write_text("[tool.ctx04]\nbudget_tokens = 2500\n")
    (shop / "ctx04.toml").write_text("top_k = 7\n")
    done = ctx04("config", "--repo", str(shop), config_home=config_home)
    assert done.returncode == 0, done.stderr
    assert f"top_k = 7  # repository file {shop / 'ctx04.toml'}" in done.stdout
    assert "budget_tokens = 4000  # default\n" in done.stdout


def test_environment_disable_outranks_a_file_and_the_command_line_adds(
    shop: Path, config_home: Path
) -> None:
    (shop / "ctx04.toml").write_text('disable = ["history"]\n')
    done = ctx04(
        "config", "--repo", str(shop), config_home=config_home, CTX04_DISABLE="callgraph"
    )
    assert 'disable = ["callgraph"]  # environment CTX04_DISABLE\n' in done.stdout
    done = ctx04(
        "retrieve", TASK, "--repo", str(shop), "--format", "json", "--disable", "bm25",
        config_home=config_home,
    )
    plugins = json.loads(done.stdout)["diagnostics"]["plugins"]
    assert ("bm25" in plugins, "history" in plugins, "callgraph" in plugins) == (
        False, False, True
    )


def test_an_unknown_key_is_one_line_naming_file_and_key(shop: Path, config_home: Path) -> None:
    (shop / "ctx04.toml").write_text("budget = 2000\n")
    done = ctx04("retrieve", TASK, "--repo", str(shop), config_home=config_home)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"ctx04: error: repository file {shop / 'ctx04.toml'}: unknown setting 'budget' "
        "(ctx04 config lists them)\n"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('budget_tokens = "lots"', "budget_tokens is an integer, not 'lots'"),
        ("budget_tokens = 2.5", "budget_tokens is an integer, not '2.5'"),
        ('path_boost = "high"', "path_boost is a number, not 'high'"),
        ('repository_idf = "maybe"', "repository_idf is true or false, not 'maybe'"),
        ('fusion = "magic"', "fusion (CTX04_FUSION) is one of weighted, learned, not 'magic'"),
        ("top_k = { n = 3 }", "top_k is a value, not a table"),
        ('disable = "history"', "disable is a list of plugin names, not 'history'"),
        ('disable = ["nosuch"]',
         "disable: no installed plugin named 'nosuch' (ctx04 plugins lists them)"),
    ],
)
def test_a_bad_value_is_one_line_naming_file_and_key(
    shop: Path, config_home: Path, line: str, message: str
) -> None:
    user = user_file(config_home, line + "\n")
    done = ctx04("retrieve", TASK, "--repo", str(shop), config_home=config_home)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"ctx04: error: user file {user}: {message}\n"


def test_a_file_that_is_not_toml_is_one_line(shop: Path, config_home: Path) -> None:
    (shop / "ctx04.toml").write_text("budget_tokens = \n")
    done = ctx04("config", "--repo", str(shop), config_home=config_home)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"ctx04: error: {shop / 'ctx04.toml'}: not valid TOML: "
        "Invalid value (at line 1, column 17)\n"
    )


def test_set_on_the_command_line_checks_types_the_same_way(
    shop: Path, config_home: Path
) -> None:
    done = ctx04(
        "retrieve", TASK, "--repo", str(shop), "--set", "budget_tokens=lots",
        config_home=config_home,
    )
    assert (done.returncode, done.stderr) == (
        2, "ctx04: error: budget_tokens is an integer, not 'lots'\n"
    )


def test_mcp_server_reads_the_repository_file(shop: Path, tmp_path: Path) -> None:
    (shop / "ctx04.toml").write_text("budget_tokens = 1234\ntop_k = 5\n")
    [result] = call_once(
        shop, tmp_path / "cache", [("retrieve", {"task": TASK, "budget_tokens": 2000})]
    )
    assert not result.is_error
    settings = result.structured_content["diagnostics"]["settings"]  # type: ignore[index]
    assert (settings["budget_tokens"], settings["top_k"]) == (2000, 5)


def test_a_fifo_or_device_config_is_never_waited_on(shop: Path, config_home: Path) -> None:
    os.mkfifo(shop / "ctx04.toml")
    (config_home / "ctx04" / "config.toml").symlink_to("/dev/zero")
    done = subprocess.run(
        [CTX04, "config", "--repo", str(shop)], capture_output=True, text=True, check=False,
        env={**os.environ, "XDG_CONFIG_HOME": str(config_home)}, timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert "budget_tokens = 4000  # default\n" in done.stdout


def test_mcp_server_refuses_a_bad_repository_file_at_start(
    shop: Path, config_home: Path
) -> None:
    (shop / "ctx04.toml").write_text("top_k = \"many\"\n")
    done = subprocess.run(
        [CTX04, "mcp", "--repo", str(shop)], capture_output=True, text=True, check=False,
        stdin=subprocess.DEVNULL, env={**os.environ, "XDG_CONFIG_HOME": str(config_home)},
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"ctx04: error: repository file {shop / 'ctx04.toml'}: top_k is an integer, not 'many'\n"
    )


@pytest.mark.parametrize("where", ["ctx04.toml", "pyproject.toml"])
def test_a_repository_cannot_choose_where_its_code_is_sent(
    shop: Path, config_home: Path, where: str
) -> None:
    # A hostile repository's file would send the code the door reads, and the
    # secret in any environment variable, to its own server.
    table = "" if where == "ctx04.toml" else "[tool.ctx04]\n"
    (shop / where).write_text(table + 'model_url = "http://127.0.0.1:9/v1"\n')
    done = ctx04("retrieve", TASK, "--repo", str(shop), config_home=config_home)
    suffix = "" if where == "ctx04.toml" else " [tool.ctx04]"
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"ctx04: error: repository file {shop / where}{suffix}: model_url cannot be set by a "
        "repository's own file (it says where code is sent or what is loaded): set it in "
        f"{config_home / 'ctx04' / 'config.toml'}, the environment or the command line\n"
    )
    # The user's own file may.
    (shop / where).unlink()
    user_file(config_home, 'model_url = "http://127.0.0.1:9/v1"\n')
    done = ctx04("config", "--repo", str(shop), config_home=config_home)
    assert done.returncode == 0, done.stderr
    assert 'model_url = "http://127.0.0.1:9/v1"  # user file' in done.stdout


def test_the_user_only_settings_are_settings() -> None:
    from ctx04_core.config import USER_ONLY
    from ctx04_core.settings import SETTING_NAMES

    assert USER_ONLY <= SETTING_NAMES
