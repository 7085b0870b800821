import Foundation
import SecurityProtocol
import Testing

@testable import Authenticators

#if canImport(Glibc)
    import Glibc
#endif

/// One test's virtual fingerprint reader: a fresh socket path (gotcha G5), the environment libfprint reads when a
/// new `FpContext` enumerates, and a fresh state directory.
///
/// `FP_DRIVERS_WHITELIST` keeps every real reader out. The environment is process-global, so suites using this
/// fixture are `.serialized`, and every authenticator creates its own `FpContext` after the variables are set.
struct VirtualReaderFixture {
    let directory: TemporaryDirectory
    let socket: VirtualReaderSocket
    let driver: String

    var stateDirectory: String { directory.path + "/state" }

    init(storage: Bool = false) throws {
        directory = try TemporaryDirectory()
        socket = VirtualReaderSocket(path: directory.path + "/reader.sock")
        driver = storage ? "virtual_device_storage" : "virtual_device"
        setenv("FP_DRIVERS_WHITELIST", "virtual_device:virtual_device_storage", 1)
        if storage {
            unsetenv("FP_VIRTUAL_DEVICE")
            setenv("FP_VIRTUAL_DEVICE_STORAGE", socket.path, 1)
        } else {
            unsetenv("FP_VIRTUAL_DEVICE_STORAGE")
            setenv("FP_VIRTUAL_DEVICE", socket.path, 1)
        }
    }

    /// An authenticator on this fixture's reader and state directory.
    func authenticator(
        username: String = "alice", attemptTimeout: Duration = .seconds(20)
    ) throws -> BiometricAuthenticator {
        try BiometricAuthenticator(
            configuration: .init(
                stateDirectory: stateDirectory, username: username, drivers: [driver],
                attemptTimeout: attemptTimeout))
    }

    /// Runs `body` with an opened authenticator and closes the reader afterwards, also when `body` throws.
    func withAuthenticator<T>(
        attemptTimeout: Duration = .seconds(20), _ body: (BiometricAuthenticator) async throws -> T
    ) async throws -> T {
        let authenticator = try authenticator(attemptTimeout: attemptTimeout)
        try await authenticator.open()
        do {
            let value = try await body(authenticator)
            await authenticator.close()
            return value
        } catch {
            await authenticator.close()
            throw error
        }
    }

    /// Enrolls `finger` by feeding `scans` (by default one `SCAN <printID>` per stage) while the enrollment runs.
    func enroll(
        _ authenticator: BiometricAuthenticator, printID: String, finger: Finger = .rightIndex,
        scans: [String]? = nil, progress: @escaping @Sendable (EnrollmentEvent) -> Void = { _ in }
    ) async throws -> EnrolledPrintInfo {
        async let enrolled = authenticator.enroll(finger: finger, progress: progress)
        try await socket.send(scans ?? Array(repeating: "SCAN \(printID)", count: 5))
        return try await enrolled
    }

    /// Verifies while feeding `commands`; returns the matched print or the error.
    func verify(
        _ authenticator: BiometricAuthenticator, feeding commands: [String],
        progress: @escaping @Sendable (VerificationEvent) -> Void = { _ in }
    ) async throws -> Result<EnrolledPrintInfo, AuthenticationError> {
        async let outcome = Self.capture { try await authenticator.verify(progress: progress) }
        try await socket.send(commands)
        return await outcome
    }

    static func capture<T: Sendable>(
        _ body: @Sendable () async throws -> T
    ) async -> Result<T, AuthenticationError> {
        do {
            return .success(try await body())
        } catch let error as AuthenticationError {
            return .failure(error)
        } catch {
            return .failure(AuthenticationError(.invalidContext, "unexpected error \(error)"))
        }
    }
}

extension Result {
    /// The failure, if any.
    var failure: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }

    /// The success value, if any.
    var value: Success? {
        if case .success(let value) = self { return value }
        return nil
    }
}
