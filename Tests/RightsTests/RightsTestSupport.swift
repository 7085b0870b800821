import Authenticators
import EmbeddedEngine
import Foundation
import KeychainServices
import LocalAuthentication
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityServer
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// One test's world (as LocalAuthenticationTests' world): a temporary keychain store, the virtual reader on its own
/// socket, pam_matrix knowing the user's passcode `secret`, and a client whose engine authenticates that user with
/// them: embedded, or a `localauthd` of the world's own in daemon mode (``TestMode``). `run` binds the SecItem
/// functions, new `LAContext`s, new `LARight`s and `LARightStore.shared` to it.
struct RightsWorld {
    static let service = "la-rights-test"

    let directory: String
    /// The world's reader: libfprint's virtual device, or an fprintd of the world's own (``TestBiometry``).
    let reader: WorldReader
    var socket: VirtualReaderSocket { reader.socket }
    let engine: TestEngine
    let client: any SecurityClient
    /// Whose passcode is `secret`: alice embedded, this process's user in daemon mode.
    let user: String

    init() throws {
        var template = Array("/tmp/la-right-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        directory = String(cString: made)
        reader = try WorldReader(directory: directory)
        user = TestEngine.username(preferring: "alice")
        try MatrixPAM.writeService(Self.service, in: directory, users: [(user, "secret")])
        var authentication = AuthenticationConfiguration(
            stateDirectory: directory + "/store", username: user,
            passcode: .init(service: Self.service, configurationDirectory: directory),
            readerDrivers: ["virtual_device"], attemptTimeout: .seconds(20))
        authentication.biometryBackend = reader.backend
        engine = try TestEngine(
            storeDirectory: URL(fileURLWithPath: directory + "/store"), scratch: directory + "/daemon",
            authentication: authentication)
        client = try engine.client(accessGroups: ["test.rights"])
    }

    /// The keychain store's directory (the daemon's directory for this uid in daemon mode).
    var storeDirectory: String { engine.storeDirectory.path }

    /// What `lactl` needs to reach this world's store, PAM service and reader, with no terminal prompts.
    func subprocessEnvironment() -> [String: String] {
        var environment = engine.subprocessEnvironment()
        if engine.mode == .embedded { environment.merge(reader.environment) { $1 } }
        environment["LA_PRESENTER"] = "none"
        return environment
    }

    func run<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await KeychainClientSelection.$current.withValue(client) { try await body() }
    }

    /// Enrolls a finger whose scans carry `printID`.
    func enroll(_ printID: String, finger: Finger = .rightIndex) async throws {
        _ = try await enrollThroughRequests(client, socket: socket, printID: printID, finger: finger)
    }

    /// Feeds the reader a scan of `printID` shortly after an authorization starts waiting for it.
    func scanSoon(_ printID: String) -> Task<Void, Never> {
        Task {
            _ = try? await Task.sleep(for: .milliseconds(150))
            _ = try? await socket.send("SCAN \(printID)")
        }
    }

    func close() async {
        _ = try? await client.send(.closeReader)
        engine.stop()
        reader.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A right's state changes, collected from its `stateUpdates` and from the notifications.
final class TransitionLog: @unchecked Sendable {
    // Safe to share: `entries` is a Mutex; the observer tokens are only touched in init and `stop`.
    let entries = Mutex<[String]>([])
    private var tokens: [any NSObjectProtocol] = []

    init(_ right: LARight) {
        for (name, label) in [
            (LARight.didBecomeAuthorizedNotification, "posted authorized"),
            (LARight.didBecomeUnauthorizedNotification, "posted unauthorized"),
        ] {
            tokens.append(
                NotificationCenter.default.addObserver(forName: name, object: right, queue: nil) { [self] _ in
                    self.entries.withLock { $0.append(label) }
                })
        }
    }

    func stop() {
        for token in tokens { NotificationCenter.default.removeObserver(token) }
    }

    var posted: [String] { entries.withLock { $0 } }
}

/// The OSStatus of an `NSOSStatusErrorDomain` error, or nil.
func osStatus(_ error: any Error) -> Int? {
    let error = error as NSError
    return error.domain == "NSOSStatusErrorDomain" ? error.code : nil
}

/// What the tests that run `lactl` as a server (the SSH agent, the FIDO authenticator) share.
extension RightsWorld {
    /// The environment a `lactl` of the tests runs in: the world's store, PAM service and reader, no terminal
    /// prompts.
    func toolEnvironment() -> [String: String] {
        var environment = subprocessEnvironment()
        environment["USER"] = "alice"
        return environment
    }

    /// Enrolls `printID` for the user this process runs as (the user of the `lactl` it starts), on the world's store
    /// and reader, after that user's passcode (`secret`, added to pam_matrix's password file). In daemon mode the
    /// world's user is already this process's user.
    func enrollForThisUser(_ printID: String, finger: Finger) async throws {
        let thisUser = AuthenticationConfiguration.currentUsername()
        guard user != thisUser else {
            try await enroll(printID, finger: finger)
            return
        }
        let passdb = directory + "/passdb"
        let known = try String(contentsOfFile: passdb, encoding: .utf8)
        if !known.contains("\n\(thisUser):") && !known.hasPrefix("\(thisUser):") {
            try (known + "\(thisUser):secret:\(RightsWorld.service)\n").write(
                toFile: passdb, atomically: true, encoding: .utf8)
        }
        var authentication = AuthenticationConfiguration(
            stateDirectory: storeDirectory, username: thisUser,
            passcode: .init(service: RightsWorld.service, configurationDirectory: directory),
            readerDrivers: ["virtual_device"], attemptTimeout: .seconds(20))
        authentication.biometryBackend = reader.backend
        let client = try EmbeddedClient(
            configuration: EmbeddedConfiguration(
                dataDirectory: URL(fileURLWithPath: storeDirectory), accessGroups: ["test.ssh"]),
            authentication: authentication)
        _ = try await enrollThroughRequests(client, socket: socket, printID: printID, finger: finger)
        _ = try await client.send(.closeReader)
    }
}
