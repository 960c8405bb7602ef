"""The docs say what the tool does: every option and ini key is in docs/usage.md, and the
commands the README promises exist."""

from pathlib import Path

from pytest_tesserabench import options

ROOT = Path(__file__).resolve().parents[2]


def test_every_option_and_ini_key_is_documented_in_usage():
    usage = (ROOT / "docs" / "usage.md").read_text()
    missing = [opt.flag for opt in options.OPTIONS if opt.flag not in usage]
    missing += [opt.ini for opt in options.INI_ONLY if opt.ini not in usage]
    assert not missing, f"options missing from docs/usage.md: {missing}"


def test_the_readme_commands_exist():
    readme = (ROOT / "README.md").read_text()
    dev = (ROOT / "dev").read_text()
    assert "./dev bench" in readme and "./dev test" in readme
    assert "bench)" in dev and "test)" in dev
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("./dev test")
