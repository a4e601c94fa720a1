"""Switching a block device's own write cache off for a probe, and back on after it.

The detectors time writes that must reach the flash: they carry FUA (``RWF_DSYNC``), which a
drive honours with its cache on, but a drive whose volatile cache is off times every write as
the flash takes it, the condition the geometry-detection papers ask for. Where Linux lets a
process switch the cache, this module does it for the probe's duration:

* **SCSI and SATA disks** (``sd``): the kernel's ``cache_type`` attribute
  (``/sys/block/<disk>/device/scsi_disk/<h:c:t:l>/cache_type``). Writing ``write through``
  makes the kernel send the disk a MODE SELECT clearing its caching page's WCE bit (for a SATA
  disk, libata's translation: SET FEATURES, disable write cache). The value read before is
  written back when the probe ends.
* **NVMe namespaces** (``nvme<c>n<n>``): the controller's Volatile Write Cache feature (Feature
  Identifier 06h), read with Get Features and cleared with Set Features through the admin
  pass-through ioctl of its character device ``/dev/nvme<c>``; set back when the probe ends.

Both need privileges (root, or ``CAP_SYS_ADMIN`` for the ioctl); without them, or on any
other device, the cache stays as it is and the target's notes say so: the FUA writes still
reach the flash before they return.
"""

import errno
import fcntl
import glob
import os
import re
import struct

__all__ = ["switch_off", "NVME_ADMIN_IOCTL", "nvme_admin_command"]

#: ``NVME_IOCTL_ADMIN_CMD``: ``_IOWR('N', 0x41, struct nvme_admin_cmd)`` (72 bytes).
NVME_ADMIN_IOCTL = 0xC0484E41
#: struct nvme_admin_cmd: opcode, flags, rsvd1, nsid, cdw2, cdw3, metadata, addr,
#: metadata_len, data_len, cdw10-cdw15, timeout_ms, result.
_NVME_CMD = struct.Struct("<BBHIIIQQII6III")
_GET_FEATURES, _SET_FEATURES, _VOLATILE_WRITE_CACHE = 0x0A, 0x09, 0x06


def nvme_admin_command(opcode, cdw10=0, cdw11=0):
    """The 72 bytes of an NVMe admin pass-through command without data."""
    return _NVME_CMD.pack(opcode, 0, 0, 0, 0, 0, 0, 0, 0, 0, cdw10, cdw11, 0, 0, 0, 0, 0, 0)


def _nvme_result(buf):
    return _NVME_CMD.unpack(bytes(buf))[-1]


def _disk_dir(rdev, sys_root):
    """The sysfs directory of the whole disk of block device ``rdev`` (a partition's parent)."""
    path = os.path.realpath(os.path.join(sys_root, "dev", "block",
                                         f"{os.major(rdev)}:{os.minor(rdev)}"))
    if os.path.exists(os.path.join(path, "partition")):
        path = os.path.dirname(path)
    return path


def switch_off(rdev, *, sys_root="/sys", dev_root="/dev", ioctl=fcntl.ioctl):
    """Switch the write cache of block device ``rdev`` off where Linux allows it.

    Returns ``(note, restore)``: what was done (for the target's notes) and a callable that
    puts the cache back as it was (None where nothing was changed)."""
    disk = _disk_dir(rdev, sys_root)
    name = os.path.basename(disk)
    scsi = sorted(glob.glob(os.path.join(disk, "device", "scsi_disk", "*", "cache_type")))
    if scsi:
        return _scsi(scsi[0], name)
    if name.startswith("nvme"):
        return _nvme(name, dev_root, ioctl)
    return (f"{name}: no write-cache control this probe knows (not a SCSI/SATA or NVMe "
            f"disk): the drive's cache is as it was; writes that must reach the flash carry "
            f"FUA (RWF_DSYNC)", None)


def _scsi(attr, name):
    try:
        with open(attr, encoding="ascii") as f:
            before = f.read().strip()
    except OSError as exc:
        return (f"{name}: cannot read its cache_type ({exc.strerror}): the drive's cache is as "
                f"it was; writes carry FUA", None)
    if "write back" not in before:
        return (f"{name}: its write cache is already off (cache_type: {before})", None)
    try:
        with open(attr, "w", encoding="ascii") as f:
            f.write("write through")
    except OSError as exc:
        why = "needs root" if exc.errno in (errno.EACCES, errno.EPERM) else exc.strerror
        return (f"{name}: its write cache could not be switched off ({why}): the drive's "
                f"cache stays on; writes that must reach the flash carry FUA (RWF_DSYNC)",
                None)

    def restore():
        with open(attr, "w", encoding="ascii") as f:
            f.write(before)

    return (f"{name}: its write cache switched off for the probe (SCSI cache_type: {before} → "
            f"write through), put back when it ends", restore)


def _nvme(name, dev_root, ioctl):
    m = re.fullmatch(r"(nvme\d+)(?:c\d+)?n\d+", name)
    if m is None:
        return (f"{name}: not an NVMe namespace name this probe knows: the drive's cache is as "
                f"it was; writes carry FUA", None)
    path = os.path.join(dev_root, m.group(1))
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        return (f"{name}: cannot open its controller {path} ({exc.strerror}): the drive's "
                f"cache is as it was; writes carry FUA", None)
    try:
        buf = bytearray(nvme_admin_command(_GET_FEATURES, _VOLATILE_WRITE_CACHE))
        try:
            ioctl(fd, NVME_ADMIN_IOCTL, buf)
        except OSError as exc:
            why = "needs root" if exc.errno in (errno.EACCES, errno.EPERM) else exc.strerror
            return (f"{name}: its volatile write cache could not be read ({why}): the drive's "
                    f"cache is as it was; writes carry FUA", None)
        before = _nvme_result(buf) & 1
        if not before:
            return (f"{name}: its volatile write cache is already off", None)
        buf = bytearray(nvme_admin_command(_SET_FEATURES, _VOLATILE_WRITE_CACHE, 0))
        try:
            ioctl(fd, NVME_ADMIN_IOCTL, buf)
        except OSError as exc:
            return (f"{name}: its volatile write cache could not be switched off "
                    f"({exc.strerror}): it stays on; writes carry FUA", None)
    finally:
        os.close(fd)

    def restore():
        fd = os.open(path, os.O_RDONLY)
        try:
            ioctl(fd, NVME_ADMIN_IOCTL,
                  bytearray(nvme_admin_command(_SET_FEATURES, _VOLATILE_WRITE_CACHE, 1)))
        finally:
            os.close(fd)

    return (f"{name}: its volatile write cache (NVMe feature 06h) switched off for the probe, "
            f"switched on again when it ends", restore)
