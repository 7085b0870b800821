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
/// - it runs code it wrote: a page of a private executable mapping (its vDSO, or a copy-on-write mapping of any
///   file, the app's own included) that is present but no longer the file's or the kernel's, as
///   `/proc/<pid>/pagemap` tells, or swapped out (file pages never are);
/// - no executable mapping of its executable remains: `/proc/<pid>/exe` names a file it did not exec, set afterwards
///   with `prctl(PR_SET_MM, PR_SET_MM_EXE_FILE or PR_SET_MM_MAP)` (the kernel refuses that while the old executable
///   is mapped, so the program unmapped it and runs from elsewhere);
/// - it is being traced (`TracerPid` in `/proc/<pid>/status`).
///
/// What it cannot see: code injected after the check (a debugger attaching later: `ptrace`, `/proc/<pid>/mem`,
/// within `kernel.yama.ptrace_scope` 0 and 1), libraries the program loads later (plugins, `dlopen`), and root.
/// Nor, once a program has swapped its executable, one that maps the new executable's file afterwards and runs only
/// code of root's files (the libraries' and that file's own, by return-oriented programming): the kernel keeps no
/// record of what a process exec'd that the daemon could read later. ``ExecRecord`` takes one as each exec of a
/// registered file happens, and localauthd asks it too.
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

    /// The same checks on this process itself, as the daemon starts: what they find wrong with a program that runs
    /// nothing unusual (a page map the kernel does not give, a memory map it cannot read), which would taint every
    /// program it identifies; nil when they find nothing.
    package static func checkOfItself() -> String? {
        var info = stat()
        let procEntry = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard procEntry >= 0, stat("/proc/self/exe", &info) == 0 else { return "/proc/self cannot be read" }
        defer { close(procEntry) }
        return check(procEntry: procEntry, executable: (UInt64(info.st_dev), UInt64(info.st_ino))).taint
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
        var executableMapped = false
        let pages = PageMap(procEntry: procEntry)
        for line in maps.split(separator: UInt8(ascii: "\n")) {
            // start-end perms offset major:minor inode [path]
            let fields = line.split(separator: UInt8(ascii: " "), maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count >= 5, fields[1].count == 4, fields[1][fields[1].startIndex + 2] == UInt8(ascii: "x")
            else { continue }
            let range = String(decoding: fields[0], as: UTF8.self)
            let path = fields.count > 5 ? String(decoding: fields[5], as: UTF8.self).trimmingPrefixSpaces : ""
            // A private mapping's page the process wrote is its own code, whatever file or vDSO the map names.
            if fields[1][fields[1].startIndex + 3] == UInt8(ascii: "p"), path != "[vsyscall]",
                let taint = pages.written(range: range, named: path.isEmpty ? range : path)
            {
                return taint
            }
            guard let inode = UInt64(String(decoding: fields[4], as: UTF8.self)), inode != 0 else {
                if path == "[vdso]" || path == "[vsyscall]" { continue }
                return "it maps anonymous executable memory at \(range)\(path.isEmpty ? "" : " (\(path))")"
            }
            let numbers = fields[3].split(separator: UInt8(ascii: ":"))
            guard numbers.count == 2, let major = UInt32(String(decoding: numbers[0], as: UTF8.self), radix: 16),
                let minor = UInt32(String(decoding: numbers[1], as: UTF8.self), radix: 16)
            else { return "its memory map cannot be parsed" }
            let device = deviceNumber(major: UInt64(major), minor: UInt64(minor))
            if device == executable.device && inode == executable.inode { executableMapped = true }
            guard !checked.contains([device, inode]) else { continue }
            guard let info = mappedFile(procEntry, range: range, path: path, device: device, inode: inode) else {
                return "the code it maps from \(path.isEmpty ? range : path) cannot be checked"
            }
            // The executable itself, where the map names it by another device number (a stacked file system).
            if UInt64(info.st_dev) == executable.device && UInt64(info.st_ino) == executable.inode {
                executableMapped = true
                checked.insert([device, inode])
                continue
            }
            guard info.st_uid == 0 || info.st_uid == geteuid() else {
                return "it maps code from \(path), which belongs to uid \(info.st_uid)"
            }
            guard info.st_mode & (S_IWGRP | S_IWOTH) == 0 else {
                return "it maps code from \(path), which others than its owner may write"
            }
            checked.insert([device, inode])
        }
        guard executableMapped else {
            return "no code of its executable is mapped: /proc names a file it did not exec (PR_SET_MM_EXE_FILE or"
                + " PR_SET_MM_MAP after it unmapped its own)"
        }
        return nil
    }

    /// `/proc/<pid>/pagemap`, opened once for a check (and closed with it): which pages of an executable mapping the
    /// process wrote.
    final class PageMap {
        let procEntry: Int32
        private var descriptor: Int32?
        private static let pageSize = UInt64(sysconf(Int32(_SC_PAGESIZE)))
        /// The most pages of one mapping read (1 GiB of code); a larger mapping counts as one that cannot be read.
        private static let pageLimit: UInt64 = 1 << 18

        init(procEntry: Int32) { self.procEntry = procEntry }

        /// Why the mapping at `range` (named `name` in the message) holds code the process wrote, or nil: a page
        /// present but not a file page (bit 61; a file's and the kernel's vDSO pages are, a private copy written
        /// after an `mprotect` or through a writable private mapping is not), or a page swapped out, which a file
        /// page never is. One read per mapping.
        func written(range: String, named name: String) -> String? {
            let bounds = range.split(separator: "-")
            guard bounds.count == 2, let start = UInt64(bounds[0], radix: 16),
                let end = UInt64(bounds[1], radix: 16), start < end
            else { return "its memory map cannot be parsed" }
            let first = start / Self.pageSize
            let count = (end + Self.pageSize - 1) / Self.pageSize - first
            guard count <= Self.pageLimit else { return "its mapping of \(name) is too large to check" }
            if descriptor == nil { descriptor = openat(procEntry, "pagemap", O_RDONLY | O_CLOEXEC) }
            guard let descriptor, descriptor >= 0 else { return "its page map cannot be read" }
            var entries = [UInt64](repeating: 0, count: Int(count))
            let wanted = Int(count) * 8
            let read = entries.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, wanted, off_t(first * 8)) }
            guard read == wanted else { return "its page map cannot be read" }
            for entry in entries {
                let present = entry & (1 << 63) != 0
                let swapped = entry & (1 << 62) != 0
                let filePage = entry & (1 << 61) != 0
                if swapped || (present && !filePage) {
                    return "it runs code it wrote into its mapping of \(name) at \(range) (pages no longer the file's)"
                }
            }
            return nil
        }

        deinit { if let descriptor, descriptor >= 0 { Glibc.close(descriptor) } }
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
