"""Hostile senders against `cxr listen` on loopback (issue 18 items 4 and 5, issue 42).

Starts a fresh `cxr listen` (no model, the code on PYTHONPATH) for each scenario and
prints one line per scenario:

- flood-close: 10 TCP connections from 127.0.0.2 each send a 16-byte A-ASSOCIATE-RQ
  header claiming 4 GiB and close; then a real sender (C-ECHO from 127.0.0.1) retries
  every 0.2 s: how long until it is accepted, and until 127.0.0.2 itself is accepted again
  (every slot the flood took is free).
- flood-stall: the same, but the 10 sockets stay open, sending nothing more.
- flood-partial: 10 sockets from 127.0.0.2 send 10 bytes of an A-ASSOCIATE-RQ that
  announces 200 and stay open (a slow handshake rather than a lying one).
- keepalive: 10 associations from 127.0.0.2 each send a C-ECHO every 5 s; can a real
  sender from 127.0.0.1 associate within --wait seconds?
- keepalive-many (issue 42 M2): 8 addresses (127.0.0.2-9) each open 4 associations (the
  per-address cap), 32 in all against 32 slots, and send a C-ECHO on each every 5 s; a
  real sender from 127.0.0.1 tries a C-ECHO every second for --wait seconds: when it is
  first accepted, and how many of the 32 are still open at the end.
- handshake-many (issue 42 M2): 10 addresses (127.0.0.2-11) each keep 4 connections that
  send 10 bytes of an A-ASSOCIATE-RQ announcing 200 and stall (reopened when closed), 40
  in all against 32 slots; a real sender from 127.0.0.1 tries a C-ECHO every second for
  --wait seconds: how many were accepted, and how fast.
- bombs (issue 42 H2): with the demo model, --bombs JPEG scan bombs (2048 x 2048, 3,000
  repeats of one scan, about 70 KB each, as DICOMs) are sent, then 3 real instances: how
  long until the real instances' result lines are written, against the time one real
  instance takes alone.
- store: one C-STORE of a --store-mb MB dataset (a sparse file, sent in chunks so the
  sender stays small): the answer; the listener's RSS before, at most while the dataset
  is received (sampled every 10 ms until the answer), its peak (VmHWM, which includes the
  worker reading an accepted file) and its RSS 3 s after.

Compare the current code with main by running the same script with another PYTHONPATH:

    nice -n 10 env PYTHONPATH=. python benchmarks/hostile_listener.py --store-mb 200
    nice -n 10 env PYTHONPATH=/work/main python benchmarks/hostile_listener.py --store-mb 200

`--listen-args` passes extra flags to `cxr listen` (e.g. "--max-dataset-mb 256", which
main does not know).
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench_kit import free_port
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import UID, ExplicitVRLittleEndian, generate_uid
from pynetdicom import AE, _config
from pynetdicom.sop_class import Verification  # type: ignore[attr-defined]

DX = UID("1.2.840.10008.5.1.4.1.1.1.1")
SCENARIOS = (
    "flood-close",
    "flood-stall",
    "flood-partial",
    "keepalive",
    "keepalive-many",
    "handshake-many",
    "bombs",
    "store",
)
ROOT = Path(__file__).resolve().parents[1]
sys.path += [str(ROOT / "tests")]  # dicom_factory: the scan bomb and its DICOM


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


@contextmanager
def _listener(tmp: Path, extra: list[str]) -> Iterator[tuple[subprocess.Popen[str], int]]:
    port = free_port()
    command = [
        sys.executable, "-m", "app.cli", "listen", "--host", "127.0.0.1", "--port", str(port),
        "--ae-title", "CXR", "--out", str(tmp / f"out-{port}.jsonl"), "--log-level", "warning",
        *extra,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("CXR_")}
    # cwd: `python -m` puts the working directory first on sys.path, before PYTHONPATH.
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
    try:
        assert process.stderr is not None
        banner = process.stderr.readline()
        if not banner.startswith("cxr listen:"):
            raise RuntimeError(f"cxr listen did not start: {banner}{process.stderr.read()}")
        threading.Thread(target=process.stderr.read, daemon=True).start()  # drain
        yield process, port
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _echo(port: int, bind: str = "127.0.0.1") -> str:
    """One association with a C-ECHO: 'ok', 'rejected' or 'failed'."""
    ae = AE(ae_title="BENCH")
    ae.add_requested_context(Verification)
    ae.acse_timeout = ae.network_timeout = 5
    assoc = ae.associate("127.0.0.1", port, ae_title="CXR", bind_address=(bind, 0))
    if assoc.is_established:
        status = assoc.send_c_echo()
        assoc.release()
        return "ok" if status and status.Status == 0 else "failed"
    return "rejected" if assoc.is_rejected else "failed"


def _until_accepted(port: int, wait: float, bind: str = "127.0.0.1") -> float | None:
    """Seconds until a C-ECHO association from `bind` succeeds (retried every 0.2 s)."""
    began = time.monotonic()
    while time.monotonic() - began < wait:
        if _echo(port, bind) == "ok":
            return time.monotonic() - began
        time.sleep(0.2)
    return None


def _seconds(value: float | None, wait: float) -> str:
    return f"after {value:.1f} s" if value is not None else f"still refused after {wait:.0f} s"


def _flood(port: int, wait: float, *, close: bool, partial: bool = False) -> str:
    if partial:  # announces 200 bytes, sends 4 of the body
        header = struct.pack(">BBL", 0x01, 0, 200) + bytes(4)
    else:  # 16 bytes, announcing 4 GiB
        header = struct.pack(">BBL", 0x01, 0, 0xFFFFFFFF) + bytes(10)
    began = time.monotonic()
    sockets = []
    for _ in range(10):
        s = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0))
        s.sendall(header)
        if close:
            s.close()
        else:
            sockets.append(s)
    try:
        real = _until_accepted(port, wait)
        again = _until_accepted(port, max(0.0, wait - (time.monotonic() - began)), "127.0.0.2")
        if again is not None:
            again = time.monotonic() - began
    finally:
        for s in sockets:
            s.close()
    return (
        f"real sender (127.0.0.1) accepted {_seconds(real, wait)}; the flooding address "
        f"accepted again {_seconds(again, wait)}"
    )


def _keepalive(port: int, wait: float) -> str:
    stop = threading.Event()
    held = []
    for _ in range(10):
        ae = AE(ae_title="KEEPALIVE")
        ae.add_requested_context(Verification)
        assoc = ae.associate("127.0.0.1", port, ae_title="CXR", bind_address=("127.0.0.2", 0))
        if assoc.is_established:
            held.append(assoc)

    def ping() -> None:
        while not stop.wait(5):
            for assoc in held:
                if assoc.is_established:
                    assoc.send_c_echo()

    pinger = threading.Thread(target=ping, daemon=True)
    pinger.start()
    try:
        result = _until_accepted(port, wait)
    finally:
        stop.set()
        pinger.join()
        for assoc in held:
            if assoc.is_established:
                assoc.release()
    return (
        f"{len(held)} of 10 keep-alive associations from 127.0.0.2 held; real sender "
        f"(127.0.0.1) accepted {_seconds(result, wait)}"
    )


def _keepalive_many(port: int, wait: float) -> str:
    stop = threading.Event()
    held = []
    for host in range(2, 10):
        for _ in range(4):
            ae = AE(ae_title="KEEPALIVE")
            ae.add_requested_context(Verification)
            ae.acse_timeout = ae.network_timeout = 10
            bind = (f"127.0.0.{host}", 0)
            assoc = ae.associate("127.0.0.1", port, ae_title="CXR", bind_address=bind)
            if assoc.is_established:
                held.append(assoc)

    def ping() -> None:
        while not stop.wait(5):
            for assoc in held:
                if assoc.is_established:
                    assoc.send_c_echo()

    pinger = threading.Thread(target=ping, daemon=True)
    pinger.start()
    began = time.monotonic()
    first: float | None = None
    accepted = tries = 0
    try:
        while time.monotonic() - began < wait:
            tries += 1
            if _echo(port) == "ok":
                accepted += 1
                if first is None:
                    first = time.monotonic() - began
            time.sleep(1.0)
    finally:
        stop.set()
        pinger.join()
        still = sum(a.is_established for a in held)
        for assoc in held:
            if assoc.is_established:
                assoc.release()
    return (
        f"{len(held)} keep-alive associations from 8 addresses; real sender (127.0.0.1) "
        f"first accepted {_seconds(first, wait)}, {accepted} of {tries} C-ECHOs accepted; "
        f"{still} keep-alive associations still open at the end"
    )


def _handshake_many(port: int, wait: float) -> str:
    partial = struct.pack(">BBL", 0x01, 0, 200) + bytes(4)
    stop = threading.Event()
    held: dict[str, list[socket.socket]] = {f"127.0.0.{h}": [] for h in range(2, 12)}

    def stall() -> None:  # keep 4 stalled handshakes open from each address
        while not stop.is_set():
            for host, socks in held.items():
                for s in list(socks):
                    try:
                        if s.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b"":
                            raise ConnectionResetError
                    except BlockingIOError:
                        continue
                    except OSError:
                        pass
                    socks.remove(s)
                    s.close()
                while len(socks) < 4 and not stop.is_set():
                    try:
                        s = socket.create_connection(
                            ("127.0.0.1", port), timeout=2, source_address=(host, 0)
                        )
                        s.sendall(partial)
                    except OSError:
                        break
                    socks.append(s)
            stop.wait(0.2)

    staller = threading.Thread(target=stall, daemon=True)
    staller.start()
    time.sleep(2.0)  # the stalls in place
    outcomes: list[tuple[str, float]] = []
    began = time.monotonic()
    while time.monotonic() - began < wait:
        t0 = time.monotonic()
        outcomes.append((_echo(port), time.monotonic() - t0))
        time.sleep(1.0)
    stop.set()
    staller.join()
    for socks in held.values():
        for s in socks:
            s.close()
    ok = [t for outcome, t in outcomes if outcome == "ok"]
    worst = f", slowest {max(ok):.2f} s" if ok else ""
    return f"real sender accepted {len(ok)} of {len(outcomes)} tries{worst}"


def _bombs(tmp: Path, extra: list[str], count: int) -> str:
    from dicom_factory import build_dataset, chest_pixels, jpeg_dicom, scan_bomb_jpeg

    bomb = scan_bomb_jpeg(side=2048, repeats=3000)
    bombs = [jpeg_dicom(bomb, 2048, 2048) for _ in range(count)]
    real = [build_dataset(pixels=chest_pixels(512, 512, seed=i)) for i in range(4)]
    model = ["--model", str(ROOT / "models" / "configs" / "demo_phantoms.v3.pt")]

    def send(port: int, datasets: list[Dataset]) -> None:
        ae = AE(ae_title="BENCH")
        for ds in datasets:
            ae.add_requested_context(ds.SOPClassUID, ds.file_meta.TransferSyntaxUID)
        ae.acse_timeout = ae.network_timeout = ae.dimse_timeout = 60
        assoc = ae.associate("127.0.0.1", port, ae_title="CXR")
        assert assoc.is_established, "association refused"
        for ds in datasets:
            assoc.send_c_store(ds)
        assoc.release()

    def until_written(out: Path, uids: set[str], limit: float) -> float | None:
        began = time.monotonic()
        while time.monotonic() - began < limit:
            if out.exists() and all(uid in out.read_text() for uid in uids):
                return time.monotonic() - began
            time.sleep(0.05)
        return None

    with _listener(tmp, extra + model) as (_, port):
        out = tmp / f"out-{port}.jsonl"
        send(port, [real[0]])  # warm: the model and the decoding worker loaded
        until_written(out, {real[0].SOPInstanceUID}, 120)
        send(port, [real[1]])
        alone = until_written(out, {real[1].SOPInstanceUID}, 120)
        send(port, bombs)
        send(port, real[2:])
        behind = until_written(out, {ds.SOPInstanceUID for ds in real[2:]}, 600)
    alone_s = f"{alone:.2f} s" if alone is not None else "never"
    behind_s = f"{behind:.2f} s" if behind is not None else "not within 600 s"
    return (
        f"one real instance alone written in {alone_s}; two sent after {count} scan bombs "
        f"({len(bomb) / 1024:.0f} KB each) written in {behind_s}"
    )


def _sparse_dicom(path: Path, size: int) -> None:
    """A DX whose Pixel Data is `size` bytes of zeros, written as a sparse file."""
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.file_meta.MediaStorageSOPClassUID = ds.SOPClassUID = DX
    ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID = generate_uid()
    ds.StudyInstanceUID, ds.SeriesInstanceUID = generate_uid(), generate_uid()
    ds.Modality = "DX"
    side = min(65535, math.isqrt(size // 2))
    ds.Rows = ds.Columns = side
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.save_as(path, enforce_file_format=True)
    with path.open("ab") as f:  # (7FE0,0010) OW, explicit VR little endian, then zeros
        f.write(struct.pack("<HH2sHL", 0x7FE0, 0x0010, b"OW", 0, size))
        f.truncate(f.tell() + size)


def _store(port: int, pid: int, path: Path, size_mb: int) -> str:
    _config.STORE_SEND_CHUNKED_DATASET = True
    ae = AE(ae_title="BENCH")
    ae.add_requested_context(DX, ExplicitVRLittleEndian)
    ae.acse_timeout = ae.network_timeout = 120
    before = _kib(pid, "VmRSS")
    receiving = [before]
    sending = threading.Event()

    def sample() -> None:  # the listener's RSS while the dataset is received
        while not sending.wait(0.01):
            receiving[0] = max(receiving[0], _kib(pid, "VmRSS"))

    sampler = threading.Thread(target=sample, daemon=True)
    began = time.monotonic()
    assoc = ae.associate("127.0.0.1", port, ae_title="CXR", max_pdu=65536)
    if not assoc.is_established:
        return f"store {size_mb} MB: association {'rejected' if assoc.is_rejected else 'failed'}"
    sampler.start()
    try:
        status = assoc.send_c_store(path)
        answer = f"status 0x{int(status.Status):04X}" if status else "no answer (aborted)"
    except (OSError, RuntimeError) as exc:
        answer = f"no answer ({type(exc).__name__})"
    finally:
        sending.set()
        sampler.join()
        if assoc.is_established:
            assoc.release()
    elapsed = time.monotonic() - began
    time.sleep(3)  # the worker reads what was accepted
    peak, after = _kib(pid, "VmHWM"), _kib(pid, "VmRSS")
    return (
        f"store {size_mb} MB: {answer} after {elapsed:.1f} s; listener RSS {before / 1024:.0f} MB "
        f"before, {receiving[0] / 1024:.0f} MB at most while receiving, peak {peak / 1024:.0f} "
        f"MB with processing, {after / 1024:.0f} MB 3 s after"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="(all)")
    parser.add_argument("--wait", type=float, default=75.0, help="seconds a sender retries")
    parser.add_argument("--store-mb", type=int, default=200, help="dataset size for `store`")
    parser.add_argument("--listen-args", default="", help="extra `cxr listen` flags")
    parser.add_argument("--bombs", type=int, default=4, help="scan bombs of `bombs`")
    args = parser.parse_args()
    extra = shlex.split(args.listen_args)
    code = os.environ.get("PYTHONPATH", "(installed)")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        for scenario in args.scenario or SCENARIOS:
            if scenario == "bombs":
                line = _bombs(tmp, extra, args.bombs)
                sys.stdout.write(f"hostile_listener [{code}] {scenario}: {line}\n")
                continue
            with _listener(tmp, extra) as (process, port):
                if scenario == "flood-close":
                    line = _flood(port, args.wait, close=True)
                elif scenario == "flood-stall":
                    line = _flood(port, args.wait, close=False)
                elif scenario == "flood-partial":
                    line = _flood(port, args.wait, close=False, partial=True)
                elif scenario == "keepalive":
                    line = _keepalive(port, args.wait)
                elif scenario == "keepalive-many":
                    line = _keepalive_many(port, args.wait)
                elif scenario == "handshake-many":
                    line = _handshake_many(port, args.wait)
                else:
                    path = tmp / "big.dcm"
                    _sparse_dicom(path, args.store_mb * 1024 * 1024)
                    line = _store(port, process.pid, path, args.store_mb)
                    path.unlink()
            sys.stdout.write(f"hostile_listener [{code}] {scenario}: {line}\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
