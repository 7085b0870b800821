#if canImport(Glibc)
    import Glibc
#endif

/// Whether a connected process runs its executable as the daemon sees it, or as something else arranged it: the
/// facts beyond `/proc/<pid>/exe` that decide whether a process may have its registered application's identity.
///
/// A process is **tainted** when any of these holds, and a tainted process never gets a registered identity:
/// - it is in another mount namespace or user namespace than the daemon (`/proc/<pid>/ns/mnt`, `ns/user`): there a
///   path can name another file (`unshare -Urm` and a bind mount over the registered path) and the files it loads
///   are not the ones the daemon sees;
/// - its environment names a variable the loader or glibc honours to load code (``injectingVariables``:
///   `LD_PRELOAD`, `LD_AUDIT`, `LD_LIBRARY_PATH`, …) — read from `/proc/<pid>/environ`, i.e. as the program was
///   started, unless the program itself overwrote that memory since;
/// - it maps executable code from a file that root (or the daemon's own user) did not write: a file owned by
///   another user, or writable by its group or by others (a preloaded library, a library found through a writable
///   directory, a `memfd`), other than the executable itself;
/// - it maps anonymous executable memory (code copied out of a library that then unmapped itself, or a JIT);
/// - it is being traced (`TracerPid` in `/proc/<pid>/status`).
///
/// What it cannot see: code injected after the check (a debugger attaching later: `ptrace`, `/proc/<pid>/mem`,
/// within `kernel.yama.ptrace_scope` 0 and 1), libraries the program loads later (plugins, `dlopen`), and root.
package struct ProgramIntegrity: Sendable, Equatable {
    /// Why the process is tainted; nil when none of the checks above found anything.
    package var taint: String?

    /// Variables of the process's environment that make the loader or glibc load code of the caller's choosing.
    package static let injectingVariables: Set<String> = [
        "LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "LD_PROFILE", "LD_ORIGIN_PATH", "GCONV_PATH",
    ]
    /// The longest environment and memory map read; a longer one counts as tainted (it could hide what follows).
    static let readLimit = 8 << 20

    /// Checks the process whose `/proc` entry is `procEntry` and whose executable is `executable` (which may be
    /// owned by anyone: it is identified by its registration, not by its owner).
    static func check(procEntry: Int32, executable: (device: UInt64, inode: UInt64)) -> ProgramIntegrity {
        if let taint = namespaceMismatch(procEntry) { return ProgramIntegrity(taint: taint) }
        if let taint = tracer(procEntry) { return ProgramIntegrity(taint: taint) }
        if let taint = environmentInjection(procEntry) { return ProgramIntegrity(taint: taint) }
        if let taint = mappedCode(procEntry, executable: executable) { return ProgramIntegrity(taint: taint) }
        return ProgramIntegrity(taint: nil)
    }

    /// Why the process is not in the daemon's mount and user namespaces, or nil when it is.
    static func namespaceMismatch(_ procEntry: Int32) -> String? {
        for kind in ["mnt", "user"] {
            var theirs = stat()
            var ours = stat()
            guard fstatat(procEntry, "ns/" + kind, &theirs, 0) == 0, stat("/proc/self/ns/" + kind, &ours) == 0 else {
                return "its \(kind) namespace cannot be read"
            }
            guard theirs.st_dev == ours.st_dev, theirs.st_ino == ours.st_ino else {
                return "it runs in another \(kind == "mnt" ? "mount" : "user") namespace than localauthd"
            }
        }
        return nil
    }

    /// Why the process counts as traced, or nil.
    static func tracer(_ procEntry: Int32) -> String? {
        guard let status = read("status", in: procEntry, limit: 1 << 16) else { return "its status cannot be read" }
        for line in status.split(separator: UInt8(ascii: "\n")) where line.starts(with: "TracerPid:".utf8) {
            let value = line.dropFirst("TracerPid:".utf8.count).filter { $0 != UInt8(ascii: " ") && $0 != 9 }
            return value.elementsEqual("0".utf8)
                ? nil : "it is being traced (TracerPid \(String(decoding: value, as: UTF8.self)))"
        }
        return "its status names no tracer"
    }

    /// The first variable of ``injectingVariables`` set (non-empty) in the process's environment, or nil.
    static func environmentInjection(_ procEntry: Int32) -> String? {
        guard let environment = read("environ", in: procEntry, limit: readLimit) else {
            return "its environment cannot be read, or is longer than \(readLimit) bytes"
        }
        for entry in environment.split(separator: 0) {
            guard let equals = entry.firstIndex(of: UInt8(ascii: "=")), equals < entry.endIndex - 1 else { continue }
            let name = String(decoding: entry[entry.startIndex..<equals], as: UTF8.self)
            if injectingVariables.contains(name) { return "it was started with \(name) set" }
        }
        return nil
    }

    /// Why some executable mapping of the process is not code root installed, or nil.
    static func mappedCode(_ procEntry: Int32, executable: (device: UInt64, inode: UInt64)) -> String? {
        guard let maps = read("maps", in: procEntry, limit: readLimit) else {
            return "its memory map cannot be read, or is longer than \(readLimit) bytes"
        }
        var checked: Set<[UInt64]> = [[executable.device, executable.inode]]
        for line in maps.split(separator: UInt8(ascii: "\n")) {
            // start-end perms offset major:minor inode [path]
            let fields = line.split(separator: UInt8(ascii: " "), maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count >= 5, fields[1].count == 4, fields[1][fields[1].startIndex + 2] == UInt8(ascii: "x")
            else { continue }
            let range = String(decoding: fields[0], as: UTF8.self)
            let path = fields.count > 5 ? String(decoding: fields[5], as: UTF8.self).trimmingPrefixSpaces : ""
            guard let inode = UInt64(String(decoding: fields[4], as: UTF8.self)), inode != 0 else {
                if path == "[vdso]" || path == "[vsyscall]" { continue }
                return "it maps anonymous executable memory at \(range)\(path.isEmpty ? "" : " (\(path))")"
            }
            let numbers = fields[3].split(separator: UInt8(ascii: ":"))
            guard numbers.count == 2, let major = UInt32(String(decoding: numbers[0], as: UTF8.self), radix: 16),
                let minor = UInt32(String(decoding: numbers[1], as: UTF8.self), radix: 16)
            else { return "its memory map cannot be parsed" }
            let device = deviceNumber(major: UInt64(major), minor: UInt64(minor))
            guard !checked.contains([device, inode]) else { continue }
            guard let info = mappedFile(procEntry, range: range, path: path, device: device, inode: inode) else {
                return "the code it maps from \(path.isEmpty ? range : path) cannot be checked"
            }
            guard info.st_uid == 0 || info.st_uid == geteuid() else {
                return "it maps code from \(path), which belongs to uid \(info.st_uid)"
            }
            guard info.st_mode & (S_IWGRP | S_IWOTH) == 0 else {
                return "it maps code from \(path), which others than its owner may write"
            }
            checked.insert([device, inode])
        }
        return nil
    }

    /// The status of the file mapped at `range`: through `map_files` (the very file, even if deleted or replaced;
    /// needs the daemon to be privileged), else the path as the daemon sees it when that is the same file.
    private static func mappedFile(_ procEntry: Int32, range: String, path: String, device: UInt64, inode: UInt64)
        -> stat?
    {
        var info = stat()
        if fstatat(procEntry, "map_files/" + range, &info, 0) == 0 { return info }
        guard path.hasPrefix("/"), stat(path, &info) == 0, UInt64(info.st_dev) == device, UInt64(info.st_ino) == inode
        else { return nil }
        return info
    }

    /// glibc's `makedev`: the device number `stat` reports for `major:minor` as `/proc/<pid>/maps` writes it.
    static func deviceNumber(major: UInt64, minor: UInt64) -> UInt64 {
        ((major & 0xffff_f000) << 32) | ((major & 0xfff) << 8) | ((minor & 0xffff_ff00) << 12) | (minor & 0xff)
    }

    /// The bytes of `name` under `procEntry`, nil when unreadable or longer than `limit`.
    static func read(_ name: String, in procEntry: Int32, limit: Int) -> [UInt8]? {
        let descriptor = openat(procEntry, name, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while bytes.count <= limit {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { return bytes }
            bytes += chunk[0..<count]
        }
        return nil
    }
}

extension String {
    fileprivate var trimmingPrefixSpaces: String {
        String(drop { $0 == " " })
    }
}
