import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension PeerProcess {
    /// The login session the process belongs to, as the kernel records it (never as the process says): logind's
    /// session (`session-<id>.scope` in its cgroup path, as `sd_pid_get_session` reads it), else the audit session
    /// `pam_loginuid` set at login (`/proc/<pid>/sessionid`); nil outside any session (a systemd user service, a
    /// container without logins). A process cannot leave its session by itself: `setsid` starts a new process
    /// session, not a login session, so a program without a terminal still belongs to the login that started it.
    package var loginSession: String? {
        if let cgroups = ProgramIntegrity.read("cgroup", in: procEntry, limit: 64 << 10),
            let session = Self.logindSession(inCgroups: String(decoding: cgroups, as: UTF8.self))
        {
            return "logind-" + session
        }
        if let bytes = ProgramIntegrity.read("sessionid", in: procEntry, limit: 64),
            let number = UInt32(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)),
            number != UInt32.max
        {
            return "audit-\(number)"
        }
        return nil
    }

    /// The logind session id in a `/proc/<pid>/cgroup` text: the unified hierarchy's line (`0::`), else systemd's
    /// named one, whose path has a `session-<id>.scope` component.
    static func logindSession(inCgroups text: String) -> String? {
        let lines = text.split(separator: "\n")
        let paths = lines.filter { $0.hasPrefix("0::") } + lines.filter { $0.contains(":name=systemd:") }
        for line in paths {
            guard let path = line.split(separator: ":", maxSplits: 2).last else { continue }
            for component in path.split(separator: "/")
            where component.hasPrefix("session-")
                && component.hasSuffix(".scope")
            {
                let id = component.dropFirst("session-".count).dropLast(".scope".count)
                if !id.isEmpty, id.allSatisfy({ $0.isLetter || $0.isNumber }) { return String(id) }
            }
        }
        return nil
    }
}
