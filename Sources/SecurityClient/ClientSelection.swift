import Foundation
import StoreFiles

/// Which client a program uses: the daemon when one is configured, else the embedded engine (the default).
///
/// The daemon is configured by, in order:
/// - `$LA_DAEMON_SOCKET=PATH` (an empty value means embedded);
/// - `$XDG_CONFIG_HOME/local-authentication/client.conf` (or `~/.config/…`), then
///   `/etc/local-authentication/client.conf`: lines `socket = PATH` (or `mode = embedded`), `#` comments.
///
/// A configured daemon that cannot be reached is an error (`errSecNotAvailable`), never a silent fallback to the
/// embedded engine: the program would otherwise read and write a different store.
package enum ClientSelection {
    /// Where the client comes from.
    package enum Mode: Sendable, Equatable {
        case embedded
        case daemon(socket: String)
    }

    /// The mode the environment and configuration files ask for.
    package static func mode(
        _ environment: [String: String] = ProcessInfo.processInfo.environment,
        systemConfiguration: String = "/etc/local-authentication/client.conf"
    ) -> Mode {
        if let socket = environment["LA_DAEMON_SOCKET"] {
            return socket.isEmpty ? .embedded : .daemon(socket: socket)
        }
        for path in DataLocations.clientConfigurationFiles(environment, system: systemConfiguration) {
            if let text = try? String(contentsOfFile: path, encoding: .utf8), let mode = parse(text) { return mode }
        }
        return .embedded
    }

    /// The mode a `client.conf` names, or nil when it names none.
    static func parse(_ text: String) -> Mode? {
        var mode: Mode?
        for entry in DataLocations.configurationEntries(text) {
            switch (entry.key, entry.value) {
            case ("socket", let path) where path.hasPrefix("/"): mode = .daemon(socket: path)
            case ("mode", "embedded"): mode = .embedded
            default: continue
            }
        }
        return mode
    }

    /// The access groups a program claims: `$LA_ACCESS_GROUPS` (comma-separated), else one group named after the
    /// executable (`local.<executable name>`), the way an app's default group is its application identifier.
    package static func accessGroups(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> [String] {
        environment["LA_ACCESS_GROUPS"].map {
            $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        } ?? [defaultAccessGroup()]
    }

    /// `local.<name of the running executable>`.
    package static func defaultAccessGroup() -> String {
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments.first ?? "unknown"
        return "local." + URL(fileURLWithPath: executable).lastPathComponent
    }

    /// A client of the daemon listening on `socket`, claiming the groups ``accessGroups(_:)`` names and prompting on
    /// the terminal when there is one.
    ///
    /// - Throws: `KeychainStatus(.notAvailable)` when the daemon cannot be reached.
    package static func daemonClient(socket: String, mayAccessAllGroups: Bool = false) throws -> SocketClient {
        try SocketClient(
            path: socket, accessGroups: accessGroups(), allGroups: mayAccessAllGroups,
            defaultPresenter: TerminalPresenter.environmentDefault())
    }
}
