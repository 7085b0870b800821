import Authenticators
import Enclave
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

/// A private temporary directory with a short path (Unix socket paths must fit 108 bytes).
struct ScratchDirectory: Sendable {
    let path: String

    init() throws {
        var template = Array("/tmp/la-ctx-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        path = String(cString: made)
    }

    func remove() {
        forgetUnlockedKeys(ofStoreIn: URL(fileURLWithPath: path + "/store"))
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// A clock the test moves by hand.
final class ManualClock: AttemptClock, Sendable {
    private let current: Mutex<(wall: Date, boot: TimeInterval)>

    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Mutex((start, 1_000)) }

    func now() -> Date { current.withLock { $0.wall } }

    func sinceBoot() -> TimeInterval { current.withLock { $0.boot } }

    /// Time passes: both clocks move.
    func advance(by seconds: TimeInterval) {
        current.withLock {
            $0.wall += seconds
            $0.boot += seconds
        }
    }

    /// Someone sets the wall clock (root, timedated, a time source): only the wall clock moves.
    func setWallClock(by seconds: TimeInterval) { current.withLock { $0.wall += seconds } }
}

/// One test's world: a keychain store, the virtual reader (its own socket), pam_matrix with the user's passcode
/// `secret`, and a client whose engine authenticates that user with them: embedded, or a `localauthd` of the
/// world's own in daemon mode (``TestMode``).
struct LocalAuthenticationWorld {
    static let service = "la-context-test"

    let directory: ScratchDirectory
    /// The world's reader: libfprint's virtual device, or an fprintd of the world's own (``TestBiometry``).
    let reader: WorldReader
    var socket: VirtualReaderSocket { reader.socket }
    let engine: TestEngine
    let client: any SecurityClient
    /// The clock of an embedded engine; daemon mode runs on the real clock (tests that move it are embedded-only).
    let clock: ManualClock

    /// The embedded engine's contexts, for the tests that read its internal state (they are `.embeddedOnly`).
    var contexts: AuthenticationContexts { engine.embeddedEngine!.authentication! }
    /// The embedded engine's contexts; nil in daemon mode, where checks of internal state are left out.
    var embeddedContexts: AuthenticationContexts? { engine.embeddedEngine?.authentication }

    /// - Parameters:
    ///   - reader: whether the virtual reader is an acceptable driver (false = no reader at all).
    ///   - pamService: false = a PAM service name with no configuration file (no passcode can be checked).
    ///   - user: whose passcode pam_matrix knows (`secret`) and the engine checks (embedded mode).
    ///   - unlockedKeysInProcess: the embedded engine keeps unlocked class keys in its own memory, as localauthd's
    ///     engine does (instead of the kernel keyring every embedded client of the user shares).
    init(
        reader: Bool = true, pamService: Bool = true, presenter: (any EvaluationPresenter)? = nil,
        user: String = "alice", unlockedKeysInProcess: Bool = false
    ) throws {
        directory = try ScratchDirectory()
        self.reader = try WorldReader(directory: directory.path, present: reader)
        let user = TestEngine.username(preferring: user)
        try MatrixPAM.writeService(Self.service, in: directory.path, users: [(user, "secret")])
        clock = ManualClock()
        var authentication = AuthenticationConfiguration(
            stateDirectory: directory.path + "/store", username: user,
            passcode: .init(
                service: pamService ? Self.service : "absent-service", configurationDirectory: directory.path),
            readerDrivers: [reader ? "virtual_device" : "no_such_driver"], attemptTimeout: .seconds(20), clock: clock)
        authentication.biometryBackend = self.reader.backend
        var enclave: EnclaveConfiguration?
        if unlockedKeysInProcess {
            enclave = try EnclaveConfiguration.from(environment: ProcessInfo.processInfo.environment, files: [])
            enclave?.unlockedKeys = .processMemory
        }
        engine = try TestEngine(
            storeDirectory: URL(fileURLWithPath: directory.path + "/store"), scratch: directory.path + "/daemon",
            authentication: authentication, defaultPresenter: presenter, enclave: enclave)
        client = try engine.client(accessGroups: ["test.group"])
    }

    /// The directory of the keychain store (the daemon's directory for this uid in daemon mode).
    var storeDirectory: String { engine.storeDirectory.path }

    /// Runs `body` with the SecItem functions and new `LAContext`s bound to this world's engine.
    func run<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await KeychainClientSelection.$current.withValue(client) { try await body() }
    }

    /// Enrolls a finger whose scans carry `printID`, through the enrollment request after the passcode.
    @discardableResult
    func enroll(_ printID: String, finger: Finger = .rightIndex) async throws -> EnrolledPrintInfo {
        try await enrollThroughRequests(client, socket: socket, printID: printID, finger: finger)
    }

    /// Feeds the reader a scan of `printID` once an evaluation waits for it.
    func scan(_ printID: String) async throws {
        try await socket.send("SCAN \(printID)")
    }

    /// Makes `count` fingerprint evaluations fail with a finger that matches no print, as a stranger would.
    func failScans(_ count: Int) async throws {
        for _ in 0..<count {
            let context = makeContext(in: self)
            async let code = laErrorCode {
                try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "unlock")
            }
            try await scan("mallory")
            #expect(await code == .authenticationFailed)
        }
    }

    func close() async {
        _ = try? await client.send(.closeReader)
        engine.stop()
        reader.stop()
        directory.remove()
    }
}

/// A context bound to `world` with a scripted presenter.
func makeContext(
    in world: LocalAuthenticationWorld, presenter: ScriptedAuthenticationPresenter? = ScriptedAuthenticationPresenter()
) -> LAContext {
    KeychainClientSelection.$current.withValue(world.client) {
        let context = LAContext()
        context.presenter = presenter
        return context
    }
}

/// The `LAError` code `body` throws; nil when it succeeds.
func laErrorCode(_ body: () async throws -> Bool) async -> LAError.Code? {
    do {
        _ = try await body()
        return nil
    } catch let error as LAError {
        return error.code
    } catch {
        Issue.record("not an LAError: \(error)")
        return nil
    }
}
