#!/usr/bin/env bash
# Adds (or replaces) Pi's provider `dsv41-sparks` for a dsv41-server endpoint (seed.md step 9).
#   pi/install.sh http://<head-ip>:8000[/v1]        (or DSV41_BASE_URL)
# Agent dir: PI_CODING_AGENT_DIR, else ~/.pi/agent. Only provider dsv41-sparks in models.json is
# touched (other providers are kept); models.json and settings.json are backed up with a
# timestamp first and replaced atomically. settings.json: the model is appended to enabledModels
# if that list exists; SET_DEFAULT=1 also makes it defaultProvider/defaultModel. The extension
# dsv41-sparks.ts goes to <agent-dir>/extensions/. The key is never written: Pi reads
# DSV41_API_KEY when it sends a request. PI_INSTALL=0 skips installing Pi when it is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
url="${1:-${DSV41_BASE_URL:-}}"
if [ -z "$url" ]; then
  echo "usage: $0 http://<host>:8000/v1   (or set DSV41_BASE_URL)" >&2
  exit 2
fi
url="${url%/}"
case "$url" in */v1) ;; *) url="$url/v1" ;; esac
case "$url" in http://*|https://*) ;; *) echo "$0: '$url' is not an http(s) URL" >&2; exit 2 ;; esac
agent_dir="${PI_CODING_AGENT_DIR:-$HOME/.pi/agent}"

if ! command -v pi >/dev/null 2>&1 && [ "${PI_INSTALL:-1}" != "0" ]; then
  echo "pi not found: installing @mariozechner/pi-coding-agent@0.73.1 with npm -g"
  npm install -g --no-audit --no-fund @mariozechner/pi-coding-agent@0.73.1
fi

mkdir -p "$agent_dir/extensions"
AGENT_DIR="$agent_dir" BASE_URL="$url" FRAGMENT="$here/models.fragment.json" \
SET_DEFAULT="${SET_DEFAULT:-0}" python3 - <<'PY'
import json, os, re, stat, sys, time

agent = os.environ["AGENT_DIR"]
provider_id, model_id = "dsv41-sparks", "deepseek-v4.1-flash"
stamp = time.strftime("%Y%m%d-%H%M%S")

def load(path):
    if not os.path.exists(path):
        return {}
    text = open(path, encoding="utf-8").read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        # Pi strips // line comments before parsing models.json; do the same, else stop.
        try:
            return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))
        except json.JSONDecodeError as e:
            sys.exit(f"install.sh: {path} is not valid JSON ({e}); left unchanged")

def save(path, data):
    # The backup and the new file keep the old file's mode: models.json may hold other
    # providers' API keys (0600 stays 0600); a new file is 0600.
    mode = stat.S_IMODE(os.stat(path).st_mode) if os.path.exists(path) else 0o600
    def create(name):
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        os.fchmod(fd, mode)  # O_CREAT's mode passes through the umask; an old file keeps its own
        return os.fdopen(fd, "wb")
    if os.path.exists(path):
        backup = f"{path}.{stamp}.bak"
        with open(path, "rb") as src, create(backup) as dst:
            dst.write(src.read())
        print(f"backup: {backup}")
    tmp = path + ".tmp"
    with create(tmp) as f:
        f.write((json.dumps(data, indent=2) + "\n").encode("utf-8"))
    os.replace(tmp, path)

models_path = os.path.join(agent, "models.json")
models = load(models_path)
if not isinstance(models, dict) or not isinstance(models.get("providers", {}), dict):
    sys.exit(f"install.sh: {models_path}: expected an object with a 'providers' object")
provider = json.load(open(os.environ["FRAGMENT"], encoding="utf-8"))
provider["baseUrl"] = os.environ["BASE_URL"]
models.setdefault("providers", {})[provider_id] = provider
save(models_path, models)

settings_path = os.path.join(agent, "settings.json")
settings = load(settings_path)
changed = False
entry = f"{provider_id}/{model_id}"
if isinstance(settings.get("enabledModels"), list) and entry not in settings["enabledModels"]:
    settings["enabledModels"].append(entry)
    changed = True
if os.environ.get("SET_DEFAULT") == "1":
    settings["defaultProvider"], settings["defaultModel"] = provider_id, model_id
    changed = True
if changed:
    save(settings_path, settings)
print(f"provider {provider_id} -> {os.environ['BASE_URL']} in {models_path}")
PY
cp "$here/dsv41-sparks.ts" "$agent_dir/extensions/dsv41-sparks.ts"
[ -n "${DSV41_API_KEY:-}" ] || echo "warning: DSV41_API_KEY is not set; Pi needs it in the shell that starts it" >&2
echo "run: pi --model dsv41-sparks/deepseek-v4.1-flash   (in Pi: /model, /thinking)"
