import Foundation
import SecurityClient
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
    /// - access groups: ``ClientSelection/accessGroups(_:)`` (`$LA_ACCESS_GROUPS`, else `local.<executable name>`).
    package static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> EmbeddedConfiguration {
        EmbeddedConfiguration(
            dataDirectory: defaultDataDirectory(environment), accessGroups: ClientSelection.accessGroups(environment))
    }

    /// `$LA_DATA_DIR`, `$XDG_DATA_HOME/local-authentication` or `~/.local/share/local-authentication`
    /// (``DataLocations/dataDirectory(_:)``).
    package static func defaultDataDirectory(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> URL {
        DataLocations.dataDirectory(environment)
    }
}

extension ClientSelection {
    /// The process's default client: the daemon's (``daemonClient(socket:mayAccessAllGroups:)``) or the embedded
    /// engine on the default store, prompting on the terminal when there is one.
    ///
    /// - Throws: `KeychainStatus(.notAvailable)` when the configured daemon cannot be reached or the store cannot
    ///   be opened.
    package static func fromEnvironment(mayAccessAllGroups: Bool = false) throws -> any SecurityClient {
        switch mode() {
        case .embedded: try EmbeddedClient.fromEnvironment(mayAccessAllGroups: mayAccessAllGroups)
        case .daemon(let socket): try daemonClient(socket: socket, mayAccessAllGroups: mayAccessAllGroups)
        }
    }
}
