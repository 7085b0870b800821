import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where the library keeps things and whose they are: the one place the data directory and the current user are
/// worked out, so the keychain, the authenticators, `lactl` and the SSH agent always agree.
package enum DataLocations {
    /// The embedded store's directory: `$LA_DATA_DIR`, else `$XDG_DATA_HOME/local-authentication` (an absolute
    /// path only, as the XDG specification says), else `~/.local/share/local-authentication`.
    package static func dataDirectory(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> URL {
        if let directory = environment["LA_DATA_DIR"], !directory.isEmpty {
            return URL(fileURLWithPath: directory, isDirectory: true)
        }
        if let dataHome = environment["XDG_DATA_HOME"], dataHome.hasPrefix("/") {
            return URL(fileURLWithPath: dataHome, isDirectory: true).appendingPathComponent("local-authentication")
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: home, isDirectory: true)
            .appendingPathComponent(".local/share/local-authentication")
    }

    /// The client configuration files, the user's first: `$XDG_CONFIG_HOME/local-authentication/client.conf` (an
    /// absolute path only, else `~/.config/…`), then `/etc/local-authentication/client.conf`.
    package static func clientConfigurationFiles(
        _ environment: [String: String] = ProcessInfo.processInfo.environment,
        system: String = "/etc/local-authentication/client.conf"
    ) -> [String] {
        let home = environment["HOME"] ?? NSHomeDirectory()
        let configHome = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config"
        return [configHome + "/local-authentication/client.conf", system]
    }

    /// The `key = value` lines of a configuration file, in order: `#` starts a comment, blanks around key and value
    /// are dropped, and a line without `=` is passed over.
    package static func configurationEntries(_ text: String) -> [(key: String, value: String)] {
        text.split(whereSeparator: \.isNewline).compactMap { line in
            let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let parts = content.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            return parts.count == 2 ? (parts[0], parts[1]) : nil
        }
    }

    /// The directory for the user's sockets: `$XDG_RUNTIME_DIR/local-authentication` (an absolute path only),
    /// else the system's temporary directory.
    package static func runtimeDirectory(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> URL {
        let runtime = environment["XDG_RUNTIME_DIR"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? NSTemporaryDirectory()
        return URL(fileURLWithPath: runtime, isDirectory: true).appendingPathComponent("local-authentication")
    }

    /// The name of the user the process runs as (its effective uid's passwd entry), or nil when it has none.
    package static func currentUserName() -> String? {
        userName(of: geteuid())
    }

    /// The login name of user `uid` (`getpwuid_r`), or nil when it has no passwd entry.
    package static func userName(of uid: uid_t) -> String? {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &found) == 0, found != nil, let name = entry.pw_name else {
            return nil
        }
        return String(cString: name)
    }
}
