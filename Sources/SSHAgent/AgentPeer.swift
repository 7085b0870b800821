import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The program on the other end of an agent connection, as the kernel reports it (`SO_PEERCRED`) when it connects:
/// its process, user, executable and controlling terminal. Read once per connection; a pid the kernel gave may be
/// reused after the program exits, so nothing here is trusted beyond naming where to prompt and whose approval a
/// reuse window belongs to.
public struct AgentPeer: Sendable, Equatable {
    /// The process id the kernel gave for the connection (`SO_PEERCRED`).
    public var pid: pid_t
    /// The process's user.
    public var uid: uid_t
    /// The canonical path of the program's executable (`/proc/<pid>/exe`), when readable.
    public var executable: String?

    /// A peer with these values.
    public init(pid: pid_t, uid: uid_t, executable: String?) {
        self.pid = pid
        self.uid = uid
        self.executable = executable
    }

    /// The peer `pid`/`uid` with its executable read from `/proc`.
    public init(pid: pid_t, uid: uid_t) {
        self.init(pid: pid, uid: uid, executable: Self.readLink("/proc/\(pid)/exe"))
    }

    /// The program's short name for prompts and notices (`ssh`, `ssh-keygen`), or its pid.
    public var programName: String {
        executable.map { ($0 as NSString).lastPathComponent } ?? "process \(pid)"
    }

    /// The program's controlling terminal, when it has one this user owns.
    public var terminal: PeerTerminal? { PeerTerminal(of: pid) }

    static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A program's controlling terminal: its device and whether the program is in the terminal's foreground.
///
/// Only a foreground program's terminal is read from: then the program (ssh waiting for the agent's answer) and
/// its shell are not reading it, so keystrokes go to the prompt and to nobody else. A background program's
/// terminal only gets notices written to it.
public struct PeerTerminal: Sendable, Equatable {
    /// The device, e.g. `/dev/pts/3`.
    public var device: String
    /// Whether the program's process group is the terminal's foreground process group.
    public var isForeground: Bool

    /// The controlling terminal of process `pid` from `/proc/<pid>/stat` (`tty_nr`, `pgrp`, `tpgid`), found among
    /// `/dev/pts/*` and `/dev/tty*`; nil when it has none, or the device is not a character device owned by this
    /// process's user.
    public init?(of pid: pid_t) {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm)": state ppid pgrp session tty_nr tpgid …
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 5, let pgrp = Int32(fields[2]), let ttyNumber = UInt64(fields[4]),
            let foreground = Int32(fields[5]), ttyNumber != 0
        else { return nil }
        guard let device = Self.device(number: ttyNumber) else { return nil }
        self.device = device
        isForeground = foreground == pgrp
    }

    /// The device node under `/dev/pts` or `/dev` whose number is `number`, owned by this user.
    static func device(number: UInt64) -> String? {
        var candidates: [String] = []
        if let pts = try? FileManager.default.contentsOfDirectory(atPath: "/dev/pts") {
            candidates += pts.filter { $0.allSatisfy(\.isNumber) }.map { "/dev/pts/" + $0 }
        }
        if let dev = try? FileManager.default.contentsOfDirectory(atPath: "/dev") {
            candidates += dev.filter { $0.hasPrefix("tty") && $0.dropFirst(3).allSatisfy(\.isNumber) && $0.count > 3 }
                .map { "/dev/" + $0 }
        }
        for path in candidates {
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFCHR, UInt64(info.st_rdev) == number else {
                continue
            }
            return info.st_uid == getuid() ? path : nil
        }
        return nil
    }
}
