"""A PEP 517 build backend for memgate-mcp that needs nothing beyond Python.

The package is pure Python with no dependencies, so its wheel is a zip of
memgate_mcp/ (checksums.json included) and a .dist-info folder. The bytes
depend on the files alone: fixed times and modes, sorted names.
"""

import base64
import gzip
import hashlib
import io
import os
import re
import tarfile
import zipfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = "memgate_mcp"
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _project():
    with open(os.path.join(_HERE, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    try:
        import tomllib

        return tomllib.loads(text)["project"]
    except ImportError:
        pass
    section = text.split("[project]", 1)[1].split("\n[", 1)[0]
    project = dict(re.findall(r'^([a-z-]+) = "([^"]*)"$', section, re.M))
    return project


def _metadata():
    p = _project()
    with open(os.path.join(_HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + p["name"],
        "Version: " + p["version"],
        "Summary: " + p["description"],
        "Home-page: https://github.com/memgate/memgate",
        "Requires-Python: " + p.get("requires-python", ">=3.8"),
        "Description-Content-Type: text/markdown",
    ]
    return p, "\n".join(lines) + "\n\n" + readme


def _package_files():
    folder = os.path.join(_HERE, _PACKAGE)
    names = sorted(n for n in os.listdir(folder) if n.endswith(".py") or n == "checksums.json")
    if "checksums.json" not in names:
        raise RuntimeError("memgate_mcp/checksums.json is missing: run make release first")
    out = []
    for n in names:
        with open(os.path.join(folder, n), "rb") as f:
            out.append((_PACKAGE + "/" + n, f.read()))
    return out


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p, metadata = _metadata()
    dist = p["name"].replace("-", "_")
    info = "%s-%s.dist-info" % (dist, p["version"])
    files = _package_files()
    files.append((info + "/METADATA", metadata.encode()))
    files.append((info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: memgate_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
    files.append((info + "/entry_points.txt", b"[console_scripts]\nmemgate-mcp = memgate_mcp:main\n"))
    record = "".join("%s,%s,%d\n" % (n, _record_hash(d), len(d)) for n, d in files) + info + "/RECORD,,\n"
    files.append((info + "/RECORD", record.encode()))
    name = "%s-%s-py3-none-any.whl" % (dist, p["version"])
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files:
            zi = zipfile.ZipInfo(n, _EPOCH)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, d)
    return name


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    root = "%s-%s" % (p["name"].replace("-", "_"), p["version"])
    name = root + ".tar.gz"
    members = ["pyproject.toml", "README.md", "memgate_build.py"] + [n for n, _ in _package_files()]
    with open(os.path.join(sdist_directory, name), "wb") as raw, gzip.GzipFile(
        fileobj=raw, mode="wb", mtime=0, filename=""
    ) as gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as t:
        for m in members:
            with open(os.path.join(_HERE, m), "rb") as f:
                data = f.read()
            ti = tarfile.TarInfo(root + "/" + m)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            t.addfile(ti, io.BytesIO(data))
        info = _metadata()[1].encode()
        ti = tarfile.TarInfo(root + "/PKG-INFO")
        ti.size, ti.mode, ti.mtime = len(info), 0o644, 0
        t.addfile(ti, io.BytesIO(info))
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []
