import Authenticators
import Foundation
import SecurityProtocol
import Synchronization

/// Who is asking: the keychain access groups the caller holds (its `keychain-access-groups` entitlement, in order),
/// and the client connection the request came over.
///
/// In embedded mode the groups come from the client's configuration and each client is a connection of its own;
/// the daemon derives the groups from the peer's executable and numbers its socket connections.
package struct CallerIdentity: Sendable {
    /// The caller's groups; the first is where items go when a request names none.
    package var accessGroups: [String]
    /// Whether the caller may read and write every group (an administrative tool such as `lactl`, which in
    /// embedded mode runs as the user who owns the files anyway).
    package var mayAccessAllGroups: Bool
    /// The client connection: authentication contexts belong to the connection that created them, are refused to
    /// every other, and end with it. Never 0 (the engine's own contexts).
    package var connection: UInt64
    /// Who the daemon found the caller to be (process, executable, registration), for `lactl whoami`; nil in
    /// embedded mode, where the calling process describes itself.
    package var identified: CallerInfo?
    /// Names the program at a path with a code digest, for a trusted-application list: its registered application
    /// identifier (the daemon's registry), or nil for `unregistered.<sha256>`.
    package var registeredApplication: (@Sendable (_ executable: String, _ digest: Data) -> String?)?
    /// The SHA-256 of the identified caller's executable, read (once per executable) when an item's trusted-application
    /// list first needs it; `identified.executableDigest` when that is known already.
    package var codeDigest: (@Sendable () -> Data?)?
    /// What an administrative tool's hello claimed beyond its own groups, held back until the user authenticates on
    /// this connection (``KeychainEngine/widening(_:context:)``); nil when nothing is held back.
    package var heldBackClaim: AccessClaim?
    /// The program this request is made on behalf of (``SecurityProtocol/EvaluationOptions/subject``), as the daemon
    /// identified it: trusted-application lists are checked against it and name it ("the calling program"), while
    /// the access groups stay the caller's. Nil: the caller's own requests.
    package var actingFor: Represented?

    /// A program another one asks on behalf of, identified as any caller is.
    package struct Represented: Sendable {
        /// Who the program is (process, executable, registration).
        package var info: CallerInfo
        /// The SHA-256 of its executable, when `info` does not hold it yet.
        package var codeDigest: (@Sendable () -> Data?)?

        package init(info: CallerInfo, codeDigest: (@Sendable () -> Data?)?) {
            self.info = info
            self.codeDigest = codeDigest
        }
    }

    /// A caller holding `accessGroups` on a new connection (unless `connection` names one).
    package init(
        accessGroups: [String], mayAccessAllGroups: Bool = false, connection: UInt64? = nil,
        identified: CallerInfo? = nil,
        registeredApplication: (@Sendable (String, Data) -> String?)? = nil, codeDigest: (@Sendable () -> Data?)? = nil,
        heldBackClaim: AccessClaim? = nil
    ) {
        self.accessGroups = accessGroups
        self.mayAccessAllGroups = mayAccessAllGroups
        self.connection = connection ?? Self.newConnection()
        self.identified = identified
        self.registeredApplication = registeredApplication
        self.codeDigest = codeDigest
        self.heldBackClaim = heldBackClaim
    }

    /// This caller holding its held-back claim: exactly the groups claimed (its own when the claim names none), and
    /// every group when it asked for all.
    var grantingHeldBackClaim: CallerIdentity {
        guard let claim = heldBackClaim else { return self }
        var widened = self
        if !claim.accessGroups.isEmpty { widened.accessGroups = claim.accessGroups }
        widened.mayAccessAllGroups = mayAccessAllGroups || claim.allGroups
        widened.identified?.accessGroups = widened.accessGroups
        widened.identified?.mayAccessAllGroups = widened.mayAccessAllGroups
        widened.heldBackClaim = nil
        return widened
    }

    /// The calling program as a trusted-application list names it: what the daemon found, or (embedded) this
    /// process's own executable. Nil when its code cannot be read.
    var application: TrustedApplication? {
        if let actingFor {
            guard let digest = actingFor.info.executableDigest ?? actingFor.codeDigest?() else { return nil }
            return TrustedApplication(
                applicationIdentifier: actingFor.info.applicationIdentifier
                    ?? TrustedApplication.unregisteredIdentifier(digest),
                executable: actingFor.info.executable, codeDigest: digest)
        }
        guard let identified else { return TrustedApplication.thisProcess }
        guard let digest = identified.executableDigest ?? codeDigest?() else { return nil }
        return TrustedApplication(
            applicationIdentifier: identified.applicationIdentifier
                ?? TrustedApplication.unregisteredIdentifier(digest),
            executable: identified.executable, codeDigest: digest)
    }

    /// The list entry for the program at `executable` whose code has `digest`, named as this caller's registry
    /// names it.
    func application(at executable: String, digest: Data) -> TrustedApplication {
        TrustedApplication(
            applicationIdentifier: registeredApplication?(executable, digest)
                ?? TrustedApplication.unregisteredIdentifier(digest),
            executable: executable, codeDigest: digest)
    }

    /// What `lactl whoami` shows: the daemon's finding, or (embedded) this process and the groups its
    /// configuration names, which nothing checks.
    package var info: CallerInfo {
        if let identified { return identified }
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return CallerInfo(
            mode: "embedded", uid: getuid(), userName: AuthenticationConfiguration.currentUsername(),
            pid: getpid(), executable: executable, executableDigest: nil, applicationIdentifier: nil,
            registrationFile: nil, accessGroups: accessGroups, mayAccessAllGroups: mayAccessAllGroups)
    }

    private static let lastConnection = Atomic<UInt64>(0)

    /// A connection number not given before in this process.
    package static func newConnection() -> UInt64 {
        lastConnection.add(1, ordering: .relaxed).newValue
    }

    /// Where an item goes when the request names no access group.
    var defaultAccessGroup: String? { accessGroups.first }

    func mayAccess(_ group: String) -> Bool { mayAccessAllGroups || accessGroups.contains(group) }

    /// The groups a query may see; nil = all.
    var visibleGroups: [String]? { mayAccessAllGroups ? nil : accessGroups }
}

/// The access a hello claims: groups (`LA_ACCESS_GROUPS`), and whether it asks for every group of its user.
package struct AccessClaim: Sendable, Equatable {
    package var accessGroups: [String]
    package var allGroups: Bool

    package init(accessGroups: [String], allGroups: Bool) {
        self.accessGroups = accessGroups
        self.allGroups = allGroups
    }
}
