"""memgate-mcp: runs the memgate release binary for this platform.

The binary comes from the GitHub release of this package's version (or
MEMGATE_DOWNLOAD_BASE/<asset>), is checked against the size and SHA-256 in
checksums.json (written by `make release`), and is kept per version in the
user's cache folder. One that does not match never runs. MEMGATE_BINARY runs
a local build instead. Arguments, stdio, signals and the exit code pass
through: on POSIX the launcher becomes memgate (exec); on Windows it waits
for it and forwards Ctrl+C, Ctrl+Break and termination.
"""

import hashlib
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

NAME = "memgate-mcp"
DEFAULT_TIMEOUT_SECONDS = 300.0
_HERE = os.path.dirname(os.path.abspath(__file__))


class Refusal(Exception):
    """A failure reported in one line before exiting."""


def _version():
    try:
        from importlib.metadata import version

        return version(NAME)
    except Exception:
        pass
    # A source checkout: the version of pyproject.toml beside the package.
    try:
        with open(os.path.join(_HERE, "..", "pyproject.toml"), encoding="utf-8") as f:
            m = re.search(r'^version = "([^"]+)"$', f.read(), re.M)
        if m:
            return m.group(1)
    except OSError:
        pass
    return "unknown"


VERSION = _version()
RELEASES = "https://github.com/memgate/memgate/releases/download/v" + VERSION


def asset_name():
    goos = {"linux": "linux", "darwin": "darwin", "win32": "windows"}.get(sys.platform)
    machine = platform.machine().lower()
    goarch = {"x86_64": "amd64", "amd64": "amd64", "x64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    if not goos or not goarch:
        raise Refusal(
            "no release binary for %s/%s; build memgate from source and set MEMGATE_BINARY to it"
            % (sys.platform, machine)
        )
    return "memgate-%s-%s%s" % (goos, goarch, ".exe" if goos == "windows" else "")


def load_table():
    try:
        with open(os.path.join(_HERE, "checksums.json"), encoding="utf-8") as f:
            table = json.load(f)
    except (OSError, ValueError):
        raise Refusal("this package has no checksum table (built without make release)")
    if not isinstance(table, dict) or table.get("version") != VERSION or not isinstance(table.get("assets"), dict):
        raise Refusal("the checksum table is not for version %s" % VERSION)
    return table["assets"]


def cache_dir():
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(os.path.expanduser("~"), "AppData", "Local")
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, NAME, VERSION)


def timeout_seconds():
    v = os.environ.get("MEMGATE_DOWNLOAD_TIMEOUT", "")
    if v == "":
        return DEFAULT_TIMEOUT_SECONDS
    try:
        n = float(v)
    except ValueError:
        n = 0
    if not n > 0:
        raise Refusal("MEMGATE_DOWNLOAD_TIMEOUT is not a number of seconds")
    return n


def shown(url):
    """The URL without any user and password, to print."""
    try:
        u = urllib.parse.urlsplit(url)
        host = u.hostname or ""
        if ":" in host:
            host = "[" + host + "]"
        if u.port:
            host += ":%d" % u.port
        return urllib.parse.urlunsplit((u.scheme, host, u.path, u.query, u.fragment))
    except ValueError:
        return "(an invalid URL)"


def fetch_asset(url, asset, want, seconds):
    """The bytes at url, refused unless exactly want["size"] of them arrive by the deadline."""
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("http", "https"):
        raise Refusal("cannot download %s: %s is not http or https" % (asset, scheme or "the URL"))
    deadline = time.monotonic() + seconds
    hung = Refusal("cannot download %s: no complete answer from %s within %gs" % (asset, shown(url), seconds))
    req = urllib.request.Request(url, headers={"User-Agent": "%s/%s" % (NAME, VERSION)})
    try:
        with urllib.request.urlopen(req, timeout=seconds) as res:
            declared = res.headers.get("Content-Length")
            if declared is not None and declared.strip() != str(want["size"]):
                raise Refusal(
                    "refused %s: the server sends %s bytes, the checksum table says %d" % (asset, declared.strip(), want["size"])
                )
            chunks, got = [], 0
            while True:
                if time.monotonic() > deadline:
                    raise hung
                chunk = res.read(1 << 16)
                if not chunk:
                    break
                got += len(chunk)
                if got > want["size"]:
                    raise Refusal("refused %s: more than the %d bytes the checksum table says" % (asset, want["size"]))
                chunks.append(chunk)
    except urllib.error.HTTPError as e:
        raise Refusal("cannot download %s: HTTP %d from %s" % (asset, e.code, shown(e.geturl() or url)))
    except urllib.error.URLError as e:
        if isinstance(e.reason, (TimeoutError, OSError)) and "timed out" in str(e.reason):
            raise hung
        raise Refusal("cannot download %s from %s: %s" % (asset, shown(url), e.reason))
    except (TimeoutError, OSError) as e:
        if isinstance(e, TimeoutError) or "timed out" in str(e):
            raise hung
        raise Refusal("cannot download %s from %s: %s" % (asset, shown(url), e.strerror or e))
    except Exception as e:
        if isinstance(e, Refusal):
            raise
        raise Refusal("cannot download %s from %s: %s" % (asset, shown(url), type(e).__name__))
    if got != want["size"]:
        raise Refusal("refused %s: %d bytes, the checksum table says %d" % (asset, got, want["size"]))
    return b"".join(chunks)


def write_atomically(path, data):
    """Puts data at path by way of a temporary file in the same folder."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _matches(data, want):
    return len(data) == want["size"] and hashlib.sha256(data).hexdigest() == want["sha256"]


def binary():
    asset = asset_name()
    want = load_table().get(asset)
    if not isinstance(want, dict) or not isinstance(want.get("sha256"), str) or not isinstance(want.get("size"), int):
        raise Refusal("the checksum table has no %s" % asset)
    folder = cache_dir()
    path = os.path.join(folder, asset)
    try:
        with open(path, "rb") as f:
            if _matches(f.read(), want):
                return path
    except OSError:
        pass  # not cached yet
    base = os.environ.get("MEMGATE_DOWNLOAD_BASE") or RELEASES
    data = fetch_asset(base.rstrip("/") + "/" + asset, asset, want, timeout_seconds())
    if hashlib.sha256(data).hexdigest() != want["sha256"]:
        raise Refusal("refused %s: its SHA-256 does not match the checksum table of %s %s" % (asset, NAME, VERSION))
    try:
        os.makedirs(folder, exist_ok=True)
        write_atomically(path, data)
    except OSError as e:
        raise Refusal("cannot write %s into the cache folder: %s" % (asset, e.strerror or e))
    return path


def run(path, args):
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name != "nt":
        try:
            os.execvp(path, [path] + args)
        except OSError as e:
            raise Refusal("cannot run memgate: %s" % (e.strerror or e))
    try:
        child = subprocess.Popen([path] + args)
    except OSError as e:
        raise Refusal("cannot run memgate: %s" % (e.strerror or e))

    def forward(signum, _frame):
        # Ctrl+C and Ctrl+Break reach the child through the console already.
        if signum == signal.SIGTERM:
            child.terminate()

    for name in ("SIGINT", "SIGTERM", "SIGBREAK"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), forward)
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            continue


def main():
    args = sys.argv[1:]
    try:
        local = os.environ.get("MEMGATE_BINARY")
        code = run(local if local else binary(), args)
    except Refusal as e:
        sys.stderr.write("%s: %s\n" % (NAME, str(e).replace("\n", " ")))
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
