"""The pieces of the local cluster's real nodes that run without a cluster: the OCI archives
``e2e/cluster/images.py`` writes (what ``ctr images import`` reads) and the relay
``e2e/cluster/apiproxy.py`` that carries a node's traffic to the API server."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from types import ModuleType

CLUSTER = Path(__file__).resolve().parents[2] / "e2e" / "cluster"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"cluster_{name}", CLUSTER / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


images = _load("images")


def _rootfs(tmp: Path) -> Path:
    root = tmp / "root"
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/hello").write_text("#!/bin/sh\necho hello\n")
    (root / "bin").symlink_to("usr/bin")
    return root


def _blob(tar: tarfile.TarFile, digest: str) -> bytes:
    f = tar.extractfile("blobs/sha256/" + digest.removeprefix("sha256:"))
    assert f is not None
    data = f.read()
    assert "sha256:" + hashlib.sha256(data).hexdigest() == digest
    return data


def test_an_image_archive_is_a_valid_oci_layout_with_its_name(tmp_path: Path) -> None:
    out = tmp_path / "img.oci.tar"
    images.write_oci(out, "phased.local/test:1", _rootfs(tmp_path), {"Cmd": ["/bin/hello"]})
    with tarfile.open(out) as tar:
        layout = json.loads(tar.extractfile("oci-layout").read())  # type: ignore[union-attr]
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
        assert layout == {"imageLayoutVersion": "1.0.0"}
        [entry] = index["manifests"]
        assert entry["annotations"]["io.containerd.image.name"] == "phased.local/test:1"
        assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
        manifest = json.loads(_blob(tar, entry["digest"]))
        config = json.loads(_blob(tar, manifest["config"]["digest"]))
        [layer_ref] = manifest["layers"]
        raw = gzip.decompress(_blob(tar, layer_ref["digest"]))
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(raw).hexdigest()]
    assert config["config"] == {"Cmd": ["/bin/hello"]}
    with tarfile.open(fileobj=io.BytesIO(raw)) as layer:
        members = {m.name: m for m in layer.getmembers()}
    assert members["bin"].issym() and members["bin"].linkname == "usr/bin"
    assert members["usr/bin/hello"].isreg()
    assert {m.mtime for m in members.values()} == {0}
    assert {(m.uid, m.gid) for m in members.values()} == {(0, 0)}


def test_the_same_rootfs_gives_the_same_bytes(tmp_path: Path) -> None:
    root = _rootfs(tmp_path)
    a, b = tmp_path / "a.tar", tmp_path / "b.tar"
    images.write_oci(a, "phased.local/test:1", root, {})
    (root / "usr/bin/hello").touch()  # a new mtime changes nothing
    images.write_oci(b, "phased.local/test:1", root, {})
    assert a.read_bytes() == b.read_bytes()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_relay_carries_bytes_both_ways_and_holds_them_while_frozen() -> None:
    upstream = socket.create_server(("127.0.0.1", 0))
    target = upstream.getsockname()[1]

    def echo() -> None:
        conn, _ = upstream.accept()
        with conn:
            while data := conn.recv(1024):
                conn.sendall(data.upper())

    threading.Thread(target=echo, daemon=True).start()
    port = _free_port()
    relay = subprocess.Popen(
        [
            sys.executable,
            str(CLUSTER / "apiproxy.py"),
            "--listen",
            f"127.0.0.1:{port}",
            "--to",
            f"127.0.0.1:{target}",
        ]
    )
    try:
        for _ in range(200):
            try:
                client = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except OSError:
                assert relay.poll() is None, "the relay exited"
                time.sleep(0.05)
        else:
            raise AssertionError("the relay never listened")
        with client:
            client.sendall(b"hello")
            assert client.recv(1024) == b"HELLO"
            relay.send_signal(signal.SIGSTOP)  # the link is cut ...
            client.sendall(b"again")
            relay.send_signal(signal.SIGCONT)  # ... and back: nothing was lost
            assert client.recv(1024) == b"AGAIN"
    finally:
        relay.send_signal(signal.SIGCONT)
        relay.terminate()
        relay.wait(10)
        upstream.close()
