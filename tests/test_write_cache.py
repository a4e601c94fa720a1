"""probe-geometry switches a block device's own write cache off for the probe and back on
after it (rbscope.probe.write_cache): on a SCSI/SATA disk through the kernel's cache_type, on
an NVMe namespace through Get/Set Features 06h; without the rights, it says so."""

import errno
import os
import struct

import pytest

from rbscope.probe import write_cache
from rbscope.probe.write_cache import NVME_ADMIN_IOCTL, nvme_admin_command, switch_off


def _sysfs(tmp_path, name, majmin, *, scsi=None, partition=False):
    """A sysfs tree with disk ``name`` at ``majmin`` (its partition ``name``1 at the next minor
    with ``partition``) and, with ``scsi``, its cache_type holding that text."""
    disk = tmp_path / "devices" / name
    disk.mkdir(parents=True)
    (tmp_path / "dev" / "block").mkdir(parents=True, exist_ok=True)
    os.symlink(disk, tmp_path / "dev" / "block" / majmin)
    if partition:
        part = disk / f"{name}1"
        part.mkdir()
        (part / "partition").write_text("1\n")
        major, minor = majmin.split(":")
        os.symlink(part, tmp_path / "dev" / "block" / f"{major}:{int(minor) + 1}")
    if scsi is not None:
        attr = disk / "device" / "scsi_disk" / "0:0:0:0" / "cache_type"
        attr.parent.mkdir(parents=True)
        attr.write_text(scsi + "\n")
        return attr
    return None


def test_a_scsi_disks_cache_goes_write_through_and_comes_back(tmp_path):
    attr = _sysfs(tmp_path, "sdb", "8:16", scsi="write back", partition=True)
    # Probing its partition switches the whole disk's cache.
    note, restore = switch_off(os.makedev(8, 17), sys_root=str(tmp_path))
    assert attr.read_text() == "write through"
    assert "sdb: its write cache switched off" in note and "write back" in note
    restore()
    assert attr.read_text() == "write back"


def test_a_cache_already_off_or_out_of_reach_is_left_and_said(tmp_path, monkeypatch):
    attr = _sysfs(tmp_path, "sdc", "8:32", scsi="write through")
    note, restore = switch_off(os.makedev(8, 32), sys_root=str(tmp_path))
    assert restore is None and "already off" in note
    attr.write_text("write back\n")
    # Without the rights (the kernel refuses the write to cache_type: EACCES).
    real_open = open

    def guarded(path, mode="r", *a, **kw):
        if "w" in mode and str(path) == str(attr):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, mode, *a, **kw)

    monkeypatch.setattr("builtins.open", guarded)
    note, restore = switch_off(os.makedev(8, 32), sys_root=str(tmp_path))
    monkeypatch.undo()
    assert restore is None and "could not be switched off (needs root)" in note
    assert "FUA" in note and attr.read_text() == "write back\n"
    # A disk with no control known: the cache as it was, said.
    _sysfs(tmp_path, "vda", "253:0")
    note, restore = switch_off(os.makedev(253, 0), sys_root=str(tmp_path))
    assert restore is None and "no write-cache control" in note


class _Controller:
    """An NVMe controller's admin ioctl: Get/Set Features of the volatile write cache."""

    def __init__(self, vwc=1, deny=False):
        self.vwc, self.deny, self.calls = vwc, deny, []

    def __call__(self, fd, request, buf):
        assert request == NVME_ADMIN_IOCTL and len(buf) == 72
        fields = list(struct.unpack("<BBHIIIQQII6III", bytes(buf)))
        opcode, cdw10, cdw11 = fields[0], fields[10], fields[11]
        self.calls.append((opcode, cdw10, cdw11))
        if self.deny:
            raise OSError(errno.EACCES, "Permission denied")
        assert cdw10 == 0x06  # Volatile Write Cache
        if opcode == 0x0A:
            fields[-1] = self.vwc
            buf[:] = struct.pack("<BBHIIIQQII6III", *fields)
        elif opcode == 0x09:
            self.vwc = cdw11 & 1
        return 0


def test_an_nvme_namespaces_volatile_write_cache_goes_off_and_back_on(tmp_path):
    _sysfs(tmp_path, "nvme0n1", "259:0")
    (tmp_path / "devroot").mkdir()
    (tmp_path / "devroot" / "nvme0").write_text("")  # (the controller's character device)
    ctrl = _Controller(vwc=1)
    note, restore = switch_off(os.makedev(259, 0), sys_root=str(tmp_path),
                               dev_root=str(tmp_path / "devroot"), ioctl=ctrl)
    assert ctrl.vwc == 0 and "nvme0n1: its volatile write cache" in note
    assert ctrl.calls == [(0x0A, 0x06, 0), (0x09, 0x06, 0)]
    restore()
    assert ctrl.vwc == 1 and ctrl.calls[-1] == (0x09, 0x06, 1)
    # Already off: nothing changed; no rights: said.
    off = _Controller(vwc=0)
    note, restore = switch_off(os.makedev(259, 0), sys_root=str(tmp_path),
                               dev_root=str(tmp_path / "devroot"), ioctl=off)
    assert restore is None and "already off" in note and len(off.calls) == 1
    note, restore = switch_off(os.makedev(259, 0), sys_root=str(tmp_path),
                               dev_root=str(tmp_path / "devroot"), ioctl=_Controller(deny=True))
    assert restore is None and "needs root" in note


def test_the_admin_command_is_the_kernels_72_byte_layout():
    cmd = nvme_admin_command(0x09, 0x06, 1)
    assert len(cmd) == 72 and cmd[0] == 0x09
    # cdw10 at byte 40, cdw11 at 44 (struct nvme_passthru_cmd), result at 68.
    assert struct.unpack_from("<II", cmd, 40) == (0x06, 1)
    assert NVME_ADMIN_IOCTL == (3 << 30) | (72 << 16) | (ord("N") << 8) | 0x41
    assert write_cache._nvme_result(bytearray(cmd[:68] + b"\x01\x00\x00\x00")) == 1


def test_a_block_device_target_switches_the_cache_for_its_life_only(tmp_path):
    # A real block device (a loop device over a file) seen through a sysfs tree that gives it
    # a SCSI cache: the target switches it off when opened for writing, its clones leave it,
    # and closing puts it back.
    import shutil
    import subprocess

    from rbscope.probe.target import FileTarget

    if not shutil.which("losetup"):
        pytest.skip("no losetup on this machine")
    img = tmp_path / "disk.img"
    img.write_bytes(bytes(4 << 20))
    r = subprocess.run(["losetup", "-f", "--show", str(img)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot attach a loop device here: {r.stderr.strip()}")
    dev = r.stdout.strip()
    try:
        rdev = os.stat(dev).st_rdev
        sysfs = tmp_path / "sys"
        attr = _sysfs(sysfs, "sdz", f"{os.major(rdev)}:{os.minor(rdev)}", scsi="write back")
        info = tmp_path / "mountinfo"
        info.write_text("")
        t = FileTarget(dev, 0, 1 << 20, True, mountinfo_path=str(info), sys_root=str(sysfs))
        assert attr.read_text() == "write through"
        assert any("switched off for the probe" in n for n in t.notes)
        c = t.clone()
        c.close()
        assert attr.read_text() == "write through"  # a clone leaves it to the first
        t.pwrite_through(0, bytes(4096))
        t.close()
        assert attr.read_text() == "write back"
        # Read-only: the cache is left alone.
        ro = FileTarget(dev, mountinfo_path=str(info), sys_root=str(sysfs))
        ro.close()
        assert attr.read_text() == "write back"
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)
