import Foundation
import StoreFiles

/// Where an embedded client keeps its store and which access groups its caller holds.
package struct EmbeddedConfiguration: Sendable, Hashable {
    /// The store directory (created 0700 on first use).
    package var dataDirectory: URL
    /// The caller's keychain access groups, in order; the first is the default for new items.
    package var accessGroups: [String]
    /// Whether the caller may see every access group (administrative tools).
    package var mayAccessAllGroups: Bool
    /// Whether the client encodes every request, response, status and event it passes and decodes it back before
    /// use, so that tests exercise the protocol's format in-process. Off unless `$LA_PROTOCOL_ROUNDTRIP` is `1`
    /// (`make test` sets it): it costs two encodes and a decode per message.
    package var roundTripsMessages: Bool

    package init(
        dataDirectory: URL, accessGroups: [String], mayAccessAllGroups: Bool = false,
        roundTripsMessages: Bool = EmbeddedConfiguration.roundTripsMessagesByDefault
    ) {
        self.dataDirectory = dataDirectory
        self.accessGroups = accessGroups
        self.mayAccessAllGroups = mayAccessAllGroups
        self.roundTripsMessages = roundTripsMessages
    }

    /// Whether `$LA_PROTOCOL_ROUNDTRIP` was `1` when the process first asked.
    package static let roundTripsMessagesByDefault = roundTripsMessages(ProcessInfo.processInfo.environment)

    /// Whether `environment` asks clients to round-trip their messages: `LA_PROTOCOL_ROUNDTRIP=1`, nothing else.
    package static func roundTripsMessages(_ environment: [String: String]) -> Bool {
        environment["LA_PROTOCOL_ROUNDTRIP"] == "1"
    }

    /// The configuration from the environment:
    /// - store: `$LA_DATA_DIR`, else `$XDG_DATA_HOME/local-authentication`, else
    ///   `~/.local/share/local-authentication`;
    /// - access groups: `$LA_ACCESS_GROUPS` (comma-separated), else one group named after the executable
    ///   (`local.<executable name>`), the way an app's default group is its application identifier.
    package static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> EmbeddedConfiguration {
        EmbeddedConfiguration(
            dataDirectory: defaultDataDirectory(environment),
            accessGroups: environment["LA_ACCESS_GROUPS"].map {
                $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            } ?? [defaultAccessGroup()])
    }

    /// `$LA_DATA_DIR`, `$XDG_DATA_HOME/local-authentication` or `~/.local/share/local-authentication`
    /// (``DataLocations/dataDirectory(_:)``).
    package static func defaultDataDirectory(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> URL {
        DataLocations.dataDirectory(environment)
    }

    /// `local.<name of the running executable>`.
    package static func defaultAccessGroup() -> String {
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments.first ?? "unknown"
        return "local." + URL(fileURLWithPath: executable).lastPathComponent
    }
}
