"""Build the real nodes' images as OCI archives, without a registry.

    python3 e2e/cluster/images.py --out DIR [--pause NAME] [--worker NAME]
                                  [--jax REQUIREMENTS --jax-image NAME --jax-out FILE]

* ``pause.oci.tar``: the pod sandbox image, a static ``/pause`` compiled here from C with gcc
  (it sleeps until SIGINT/SIGTERM and reaps orphans).
* ``worker.oci.tar``: a Debian rootfs made of this host's installed Debian packages (Python
  3.11 with its standard library, dash, coreutils, libc-bin) plus the shared libraries their
  programs need, so a real Python training program runs in it.
* ``jax.oci.tar`` (with ``--jax REQUIREMENTS``): the worker's rootfs plus JAX on CPU and
  NumPy, installed from the hash-locked wheels of ``requirements/trainer.txt`` (and the
  shared libraries they need): the image of ``examples/jax-data-parallel``, whose program
  the pods mount from a ConfigMap.

Both are single-layer images for linux/amd64, written byte for byte the same on every run
(sorted entries, zero timestamps, no owner names). ``nodes-up.sh`` imports them into each
node's containerd with ``ctr -n k8s.io images import``; pods use them with
``imagePullPolicy: Never``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PAUSE_C = r"""
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = reap;
    sa.sa_flags = SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    for (;;) pause();
}
"""

# Host packages whose files make the worker image (their shared libraries are added by ldd).
WORKER_PACKAGES = (
    "libc6",
    "libc-bin",
    "dash",
    "coreutils",
    "python3.11-minimal",
    "libpython3.11-minimal",
    "libpython3.11-stdlib",
    "netbase",
)
SKIP_PREFIXES = (
    "/usr/share/doc",
    "/usr/share/man",
    "/usr/share/info",
    "/usr/share/locale",
    "/usr/share/lintian",
    "/usr/share/bug",
    "/etc/init.d",
)
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _layer(root: Path) -> bytes:
    """A deterministic tar of ``root`` (uncompressed)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = sorted(p for p in root.rglob("*"))
        for p in paths:
            info = tar.gettarinfo(str(p), arcname=str(p.relative_to(root)))
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isreg():
                with open(p, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return buf.getvalue()


def write_oci(out: Path, name: str, root: Path, config: dict[str, object]) -> None:
    """Write ``root`` as a one-layer image ``name`` to the OCI archive ``out``."""
    raw = _layer(root)
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0, compresslevel=6) as g:
        g.write(raw)
    layer = gz.getvalue()
    cfg = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": [_sha256(raw)]},
        },
        sort_keys=True,
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": _sha256(cfg),
                "size": len(cfg),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": _sha256(layer),
                    "size": len(layer),
                }
            ],
        },
        sort_keys=True,
    ).encode()
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": _sha256(manifest),
                    "size": len(manifest),
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rpartition(":")[2],
                    },
                }
            ],
        },
        sort_keys=True,
    ).encode()
    files = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": index,
    }
    for blob in (layer, cfg, manifest):
        files["blobs/sha256/" + _sha256(blob).split(":")[1]] = blob
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(out)
    print(f"{name}: {out} ({len(layer) // 1024} KiB layer)")


def pause_rootfs(root: Path, work: Path) -> None:
    if not shutil.which("gcc"):
        raise SystemExit(
            "error: gcc is needed to build the pause image (apt-get install gcc libc6-dev)"
        )
    src = work / "pause.c"
    src.write_text(PAUSE_C)
    subprocess.run(["gcc", "-static", "-Os", "-s", "-o", str(root / "pause"), str(src)], check=True)


def _dpkg_files(package: str) -> list[str]:
    res = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(
            f"error: the host package {package} is not installed "
            f"(apt-get install {package}); the worker image is made of installed packages"
        )
    return [line for line in res.stdout.splitlines() if line.startswith("/")]


def _real(path: str) -> str:
    """``path`` with its folders resolved (a merged-/usr host lists /bin/x for /usr/bin/x)."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _copy(src: str, root: Path) -> None:
    src = _real(src)
    dest = root / src.lstrip("/")
    if os.path.lexists(dest):
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    if os.path.islink(src):
        os.symlink(os.readlink(src), dest)
        target = os.path.join(os.path.dirname(src), os.readlink(src))
        if os.path.lexists(target):
            _copy(target, root)
    elif os.path.isfile(src):
        shutil.copy2(src, dest)


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def worker_rootfs(root: Path) -> None:
    for pkg in WORKER_PACKAGES:
        for path in _dpkg_files(pkg):
            if path.startswith(SKIP_PREFIXES) or (os.path.isdir(path) and not os.path.islink(path)):
                continue
            if os.path.lexists(path):
                _copy(path, root)
    add_libraries(root)
    # A merged /usr, as on Debian 12.
    for top in ("bin", "sbin", "lib", "lib64"):
        if os.path.islink("/" + top) and not os.path.lexists(root / top):
            os.symlink(os.readlink("/" + top), root / top)
    usr_bin = root / "usr/bin"
    if not (usr_bin / "python3").exists():
        os.symlink("python3.11", usr_bin / "python3")
    if not (usr_bin / "sh").exists():
        os.symlink("dash", usr_bin / "sh")
    etc = root / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n"
    )
    (etc / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
    (etc / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files dns\n")
    for d in ("tmp", "root", "proc", "sys", "dev", "etc", "var/tmp", "workspace"):
        (root / d).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "tmp", 0o1777)
    # The image must run Python: check it here, not in a pod.
    check_python(root, "import json, socket, hashlib, ssl")


def add_libraries(root: Path) -> None:
    """Copy in the host's shared libraries that the rootfs' programs and extension modules
    need (what ldd resolves), until nothing is missing."""
    needed: set[str] = set()
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink() and _is_elf(p):
            out = subprocess.run(["ldd", str(p)], capture_output=True, text=True).stdout
            for line in out.splitlines():
                parts = line.split("=>")
                lib = (parts[1] if len(parts) > 1 else parts[0]).strip().split(" ")[0]
                if lib.startswith("/"):
                    needed.add(lib)
    for lib in sorted(needed):
        _copy(lib, root)


def check_python(root: Path, statement: str) -> None:
    check = subprocess.run(
        ["chroot", str(root), "/usr/bin/python3", "-c", f"{statement}; print('ok')"],
        capture_output=True,
        text=True,
    )
    if check.returncode != 0 or check.stdout.strip() != "ok":
        why = check.stderr.strip()
        raise SystemExit(f"error: {statement!r} fails in the image's rootfs: {why}")


def jax_rootfs(root: Path, requirements: Path) -> None:
    """Install the hash-locked wheels of ``requirements`` (no dependency resolution: the
    file lists them all) where the image's Python finds them, then their libraries."""
    site = root / "usr/local/lib/python3.11/dist-packages"
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--require-hashes", "--only-binary=:all:", "--no-compile",
            "--target", str(site), "-r", str(requirements),
        ],
        check=True,
    )  # fmt: skip
    add_libraries(root)
    # Importing jax loads jaxlib's shared libraries (running XLA needs /dev, not in a chroot).
    check_python(root, "import jax, jaxlib, numpy; jax.devices()")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--pause", default="phased.local/pause:3.10")
    p.add_argument("--worker", default="phased.local/worker:py3.11")
    p.add_argument("--jax", type=Path, help="requirements file of the JAX image (hash-locked)")
    p.add_argument("--jax-image", default="phased.local/jax:cpu")
    p.add_argument("--jax-out", type=Path, help="where to write it (default OUT/jax.oci.tar)")
    args = p.parse_args(argv)
    config: dict[str, object] = {
        "Env": [f"PATH={PATH}", "LANG=C.UTF-8"],
        "Cmd": ["/usr/bin/python3"],
        "WorkingDir": "/",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="phased-images-") as tmp:
        work = Path(tmp)
        pause_root = work / "pause-root"
        pause_root.mkdir()
        pause_rootfs(pause_root, work)
        write_oci(args.out / "pause.oci.tar", args.pause, pause_root, {"Entrypoint": ["/pause"]})
        worker_root = work / "worker-root"
        worker_root.mkdir()
        worker_rootfs(worker_root)
        write_oci(args.out / "worker.oci.tar", args.worker, worker_root, config)
        if args.jax is not None:
            jax_root = work / "jax-root"
            shutil.copytree(worker_root, jax_root, symlinks=True)
            jax_rootfs(jax_root, args.jax)
            out = args.jax_out or args.out / "jax.oci.tar"
            write_oci(out, args.jax_image, jax_root, config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
