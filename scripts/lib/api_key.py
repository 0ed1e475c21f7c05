"""The API key lookup shared by scripts/bench.py and scripts/smoke.py (stdlib only).

Order: --key, --key-file, env DSV41_API_KEY, then the first line of ~/.dsv41-two-sparks/api_key
(what scripts/launch.sh creates). resolve() returns (key or None, where it came from); an
unreadable key file raises OSError naming it.
"""
import os

HOME_KEY = "~/.dsv41-two-sparks/api_key"


def resolve(key=None, key_file=None):
    home_key = os.path.expanduser(HOME_KEY)
    if key is not None:
        return key, "--key"
    if key_file:
        source = f"--key-file {key_file}"
    elif os.environ.get("DSV41_API_KEY"):
        return os.environ["DSV41_API_KEY"], "env DSV41_API_KEY"
    elif os.path.exists(home_key):
        key_file, source = home_key, home_key
    else:
        return None, f"no --key, --key-file, env DSV41_API_KEY or {home_key}"
    with open(key_file) as f:
        return f.readline().strip(), source
