import Foundation
import Logging
import SecureCrypto
import SecurityProtocol
import Synchronization
import WorkThreads

/// Enrolls and verifies fingerprints with the user's reader, under the persisted attempt policy, on one of two
/// backends (``Configuration/Backend``): libfprint-2 directly, keeping templates encrypted in an
/// ``EnrolledPrintStore``; or fprintd, which owns the reader and the prints on most desktops (``FprintdReader``).
/// Attempt counting and lockout are ours on both.
///
/// - Threads: every libfprint call of the process runs on ``fprintThread``; no GLib main loop is ever run and no
///   thread-default main context is pushed (libfprint's `*_sync` calls pump the global default context).
/// - Readers are picked by driver name (``Configuration/drivers``), never by their index in libfprint's list.
/// - Each attempt (each scan, for enrollment) times out after ``Configuration/attemptTimeout`` with
///   ``AuthenticationError/Code/systemCancel``; cancelling the calling task cancels the scan at once
///   (``AuthenticationError/Code/appCancel``).
/// - A reader that is unplugged ends the operation with ``AuthenticationError/Code/biometryDisconnected``; the
///   next operation (or ``reopen()``) discovers readers afresh, which is the retry path.
package final class BiometricAuthenticator: Sendable {
    /// Where state lives, whose prints these are, and which reader to use.
    package struct Configuration: Sendable {
        /// The directory holding the encrypted prints (`fingerprints/`) and the attempt policy file.
        package var stateDirectory: String
        /// The user the prints belong to (recorded in each print).
        package var username: String
        /// Acceptable libfprint driver ids, most preferred first; nil accepts any reader (then the first by
        /// driver name and device id).
        package var drivers: [String]?
        /// How long one scan may take before the attempt is given up.
        package var attemptTimeout: Duration
        /// Who owns the reader and the prints.
        package var backend: Backend

        /// Who owns the reader and the prints.
        package enum Backend: Sendable, Equatable {
            /// This process, through libfprint (prints in `stateDirectory/fingerprints`).
            case libfprint
            /// fprintd on the bus at `address` (nil: the system bus), whose prints live under `printDirectory`.
            case fprintd(address: String?, printDirectory: String)

            /// fprintd's print store unless its `STATE_DIRECTORY` was moved.
            package static let fprintdPrintDirectory = "/var/lib/fprint"

            /// Whether fprintd is on the system bus (or can be started there): the default backend then.
            package static func fprintdIsPresent(address: String? = nil) -> Bool {
                FprintdReader.isPresent(address: address)
            }
        }

        /// A configuration for `username`'s prints in `stateDirectory`.
        package init(
            stateDirectory: String = defaultAuthenticatorStateDirectory(), username: String,
            drivers: [String]? = nil, attemptTimeout: Duration = .seconds(30), backend: Backend = .libfprint
        ) {
            self.stateDirectory = stateDirectory
            self.username = username
            self.drivers = drivers
            self.attemptTimeout = attemptTimeout
            self.backend = backend
        }
    }

    /// The thread every libfprint call of this process runs on.
    package static let fprintThread = DedicatedThread(name: "la.libfprint")
    /// The thread fprintd's blocking calls run on: one per fprintd (bus address), so that operations on its one
    /// reader run one at a time, as fprintd's claim allows.
    static func fprintdThread(for address: String?) -> DedicatedThread {
        fprintdThreads.withLock { threads in
            if let thread = threads[address ?? ""] { return thread }
            let thread = DedicatedThread(name: "la.fprintd")
            threads[address ?? ""] = thread
            return thread
        }
    }

    private static let fprintdThreads = Mutex<[String: DedicatedThread]>([:])

    private static let logger = Logger(label: "local-authentication.fingerprint")

    /// Where state lives, whose prints these are, which reader, how long a scan may take.
    package let configuration: Configuration
    /// Where the enrolled prints and the state-hash salt are kept.
    package let store: any EnrolledPrintStore
    /// The persisted attempt counters and lockout.
    package let policy: AttemptPolicy
    private let reader: FingerprintReader
    /// fprintd, on that backend.
    private let fprintd: FprintdReader?

    /// An authenticator over `store` (default: an encrypted ``FileEnrolledPrintStore`` in
    /// `stateDirectory/fingerprints`) and `policy` (default: the policy in `stateDirectory`).
    package init(
        configuration: Configuration, store: (any EnrolledPrintStore)? = nil, policy: AttemptPolicy? = nil
    ) throws {
        self.configuration = configuration
        self.store = try store ?? FileEnrolledPrintStore(directory: configuration.stateDirectory + "/fingerprints")
        self.policy = try policy ?? AttemptPolicy(directory: configuration.stateDirectory)
        self.reader = FingerprintReader(drivers: configuration.drivers)
        if case .fprintd(let address, let printDirectory) = configuration.backend {
            fprintd = FprintdReader(address: address, printDirectory: printDirectory)
        } else {
            fprintd = nil
        }
    }

    deinit {
        let reader = self.reader
        Self.fprintThread.submit { reader.release() }
    }

    /// Opens the reader (discovering it if needed) and describes it.
    /// - Throws: `biometryNotAvailable` when no acceptable reader is present or it cannot be opened.
    @discardableResult
    package func open() async throws -> ReaderInfo {
        if let fprintd {
            return try await Self.fprintdThread(for: fprintd.address).run { try Self.readerInfo(fprintd.device()) }
        }
        let reader = self.reader
        return try await Self.fprintThread.run { try reader.ensureOpen() }
    }

    /// Closes the reader; the next operation opens it again.
    package func close() async {
        // fprintd's device is claimed per operation: nothing stays open.
        guard fprintd == nil else { return }
        let reader = self.reader
        _ = try? await Self.fprintThread.run { reader.release() }
    }

    /// Closes the reader and discovers and opens it afresh: the retry path after a disconnect or a busy reader.
    @discardableResult
    package func reopen() async throws -> ReaderInfo {
        if fprintd != nil { return try await open() }
        let reader = self.reader
        return try await Self.fprintThread.run {
            reader.release()
            return try reader.ensureOpen()
        }
    }

    /// Scans a new print of `finger`, reporting each stage and retry to `progress` (called on the libfprint
    /// thread), and stores it encrypted with a fresh random identifier. An earlier print of the same finger of
    /// this user on the same driver is replaced.
    ///
    /// The enrolled-set state hash changes.
    /// - Throws: `appCancel`, `systemCancel` (a stage timed out), `biometryNotAvailable`, `biometryDisconnected`.
    package func enroll(
        finger: Finger, progress: @escaping @Sendable (EnrollmentEvent) -> Void = { _ in }
    ) async throws -> EnrolledPrintInfo {
        if let fprintd { return try await enrollThroughFprintd(fprintd, finger: finger, progress: progress) }
        let reader = self.reader
        let configuration = self.configuration
        let cancellation = OperationCancellation()
        let scanned = try await withTaskCancellationHandler {
            try await Self.fprintThread.run {
                try reader.enroll(
                    finger: finger, username: configuration.username, cancellation: cancellation,
                    timeout: configuration.attemptTimeout, progress: progress)
            }
        } onCancel: {
            cancellation.cancel(.task)
        }
        let info = EnrolledPrintInfo(
            identifier: try PrintIdentifier.random(), finger: finger, username: configuration.username,
            driver: scanned.driver, deviceID: scanned.deviceID, enrolledAt: Date())
        // Raised before any print changes, so a crash part-way can only make the state hash newer.
        try policy.advanceEnrollmentGeneration()
        let replaced = try store.prints().filter {
            $0.info.finger == finger && $0.info.username == configuration.username
                && $0.info.driver == scanned.driver && $0.info.deviceID == scanned.deviceID
        }
        try store.save(EnrolledPrint(info: info, template: scanned.template))
        for old in replaced {
            let template = old.template
            do {
                try await Self.fprintThread.run { try reader.deleteFromDevice(template) }
            } catch {
                Self.logger.warning(
                    "replaced print kept on the reader's storage",
                    metadata: ["id": "\(old.info.identifier)", "reason": "\(error)"])
            }
            _ = try store.remove(old.info.identifier)
        }
        Self.logger.debug("fingerprint enrolled", metadata: ["finger": "\(finger)", "id": "\(info.identifier)"])
        return info
    }

    /// Waits for a finger and checks it against this user's enrolled prints (identify when the reader supports
    /// it), reporting retries to `progress` (called on the libfprint thread). Returns the matching print.
    ///
    /// - Throws: `biometryLockout` before touching the reader when locked; `authenticationFailed` for a finger
    ///   that matches no print (counted: the 5th in a row locks biometry); `biometryNotEnrolled`; `appCancel`;
    ///   `systemCancel` (no usable scan before the attempt timeout); `biometryNotAvailable`;
    ///   `biometryDisconnected`.
    package func verify(
        progress: @escaping @Sendable (VerificationEvent) -> Void = { _ in }
    ) async throws -> EnrolledPrintInfo {
        try policy.checkBiometryAllowed()
        if let fprintd { return try await verifyThroughFprintd(fprintd, progress: progress) }
        let prints = try store.prints().filter { $0.info.username == configuration.username }
        guard !prints.isEmpty else {
            throw AuthenticationError(.biometryNotEnrolled, "no fingerprint is enrolled for \(configuration.username)")
        }
        let candidates = prints.map { (identifier: $0.info.identifier, template: $0.template) }
        let reader = self.reader
        let policy = self.policy
        let timeout = configuration.attemptTimeout
        let cancellation = OperationCancellation()
        let matched = try await withTaskCancellationHandler {
            try await Self.fprintThread.run {
                // Reserved here, on the reader's thread, right before the scan: evaluations queued behind this one
                // see its count and stop at the limit instead of reaching the matcher.
                try policy.withAttempt(.biometric, isCancelled: { cancellation.cancellationReason != nil }) {
                    let matched = try reader.match(
                        candidates: candidates, cancellation: cancellation, timeout: timeout, progress: progress)
                    return (matched, matched == nil ? AttemptOutcome.failure : .success)
                }
            }
        } onCancel: {
            cancellation.cancel(.task)
        }
        guard let matched, let print = prints.first(where: { $0.info.identifier == matched }) else {
            let locked = (try? policy.currentState().biometryLocked) ?? true
            throw AuthenticationError(
                .authenticationFailed,
                locked
                    ? "fingerprint not recognised; too many failures, use the passcode"
                    : "fingerprint not recognised")
        }
        return print.info
    }

    /// The enrolled prints of this user, oldest first, without templates.
    package func enrolledPrints() throws -> [EnrolledPrintInfo] {
        if let fprintd { return try fprintdPrints(fprintd) }
        return try store.prints().map(\.info).filter { $0.username == configuration.username }
            .sorted { ($0.enrolledAt, $0.identifier) < ($1.enrolledAt, $1.identifier) }
    }

    /// Removes the print with `identifier` from the store and, for readers that keep prints on the device, from
    /// the reader too (when it is present; otherwise the store copy is removed and the device copy stays unused).
    ///
    /// The enrolled-set state hash changes.
    /// - Throws: `biometryNotEnrolled` when there is no such print.
    package func remove(_ identifier: PrintIdentifier) async throws {
        if let fprintd {
            guard let print = try fprintdPrints(fprintd).first(where: { $0.identifier == identifier }) else {
                throw AuthenticationError(.biometryNotEnrolled, "no enrolled print has the identifier \(identifier)")
            }
            let user = configuration.username
            try await Self.fprintdThread(for: fprintd.address).run {
                try fprintd.delete(user: user, finger: print.finger)
            }
            return
        }
        guard let print = try store.prints().first(where: { $0.info.identifier == identifier }) else {
            throw AuthenticationError(.biometryNotEnrolled, "no enrolled print has the identifier \(identifier)")
        }
        try policy.advanceEnrollmentGeneration()
        let reader = self.reader
        let template = print.template
        do {
            try await Self.fprintThread.run { try reader.deleteFromDevice(template) }
        } catch {
            Self.logger.warning(
                "print kept on the reader's storage", metadata: ["id": "\(identifier)", "reason": "\(error)"])
        }
        _ = try store.remove(identifier)
    }

    /// The enrolled-set state hash, nil when nothing is enrolled: the store's hash (SHA-256 of the per-install salt
    /// and the sorted print identifiers) combined with the enrollment generation, which every enroll and remove
    /// raises first. It changes on every enroll and remove and is stable otherwise, across processes too; restoring
    /// an earlier copy of the print files does not bring an earlier hash back.
    ///
    /// A store whose generation was never raised (enrolled before the generation existed) keeps its earlier hash.
    package func stateHash() throws -> Data? {
        if let fprintd { return try fprintdStateHash(fprintd) }
        guard let setHash = try store.stateHash() else { return nil }
        let generation = try policy.enrollmentGeneration()
        if generation == 0 { return setHash }
        var hasher = SHA256()
        hasher.update(Data("la.enrolled-set.v2".utf8))
        hasher.update(withUnsafeBytes(of: generation.bigEndian) { Data($0) })
        hasher.update(setHash)
        return hasher.finalize()
    }
}
