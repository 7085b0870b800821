import Foundation
import SecureCrypto
import SecurityProtocol
import StoreFiles

#if canImport(Glibc)
    import Glibc
#endif

/// The fprintd backend (``BiometricAuthenticator/Configuration/Backend/fprintd(address:printDirectory:)``): fprintd
/// owns the reader and the prints; attempts, lockout and the error codes stay ours.
extension BiometricAuthenticator {
    /// A scan through fprintd: any enrolled finger (fprintd picks them: every one on a reader that can identify, the
    /// first one on a reader that can only verify), counted as an attempt, its statuses mapped onto ours.
    func verifyThroughFprintd(
        _ fprintd: FprintdReader, progress: @escaping @Sendable (VerificationEvent) -> Void
    ) async throws -> EnrolledPrintInfo {
        let prints = try fprintdPrints(fprintd)
        guard !prints.isEmpty else {
            throw AuthenticationError(.biometryNotEnrolled, "no fingerprint is enrolled for \(configuration.username)")
        }
        let (user, timeout, policy) = (configuration.username, configuration.attemptTimeout, self.policy)
        let cancellation = FprintdCancellation()
        let status = try await withTaskCancellationHandler {
            try await Self.fprintdThread(for: fprintd.address).run {
                try policy.withAttempt(.biometric, isCancelled: { cancellation.isCancelled }) {
                    let status = try fprintd.run(
                        user: user, enroll: false, finger: nil, timeout: timeout, cancellation: cancellation
                    ) { status in
                        // Waiting for a finger once fprintd started, and again after each retry, as on libfprint.
                        if status == "verify-started" { progress(.waitingForFinger) }
                        if let reason = Self.retryReason(status) {
                            progress(.retry(reason: reason, detail: status))
                            progress(.waitingForFinger)
                        }
                    }
                    switch status {
                    case "verify-match": return (status, .success)
                    case "verify-no-match": return (status, .failure)
                    default: throw Self.failure(status, operation: "verification")
                    }
                }
            }
        } onCancel: {
            cancellation.cancel()
        }
        guard status == "verify-match" else {
            let locked = (try? policy.currentState().biometryLocked) ?? true
            throw AuthenticationError(
                .authenticationFailed,
                locked
                    ? "fingerprint not recognised; too many failures, use the passcode" : "fingerprint not recognised")
        }
        // fprintd does not say which finger matched; with one enrolled, it is that one.
        return prints.count == 1 ? prints[0] : Self.anyFinger(of: prints)
    }

    /// Enrolls `finger` through fprintd (replacing an earlier print of it there), stage by stage.
    func enrollThroughFprintd(
        _ fprintd: FprintdReader, finger: Finger, progress: @escaping @Sendable (EnrollmentEvent) -> Void
    ) async throws -> EnrolledPrintInfo {
        guard finger != .unknown else {
            throw AuthenticationError(.biometryNotAvailable, "fprintd enrolls a named finger: name the finger")
        }
        let (user, timeout) = (configuration.username, configuration.attemptTimeout)
        let cancellation = FprintdCancellation()
        let status = try await withTaskCancellationHandler {
            try await Self.fprintdThread(for: fprintd.address).run {
                let total = try fprintd.device().enrollStages
                var completed = 0
                // A whole enrollment may take the attempt's time for each stage.
                return try fprintd.run(
                    user: user, enroll: true, finger: finger, timeout: timeout * max(total, 1),
                    cancellation: cancellation
                ) { status in
                    if status == "enroll-stage-passed" {
                        completed += 1
                        progress(.stageCompleted(completed: completed, total: total))
                    } else if let reason = Self.retryReason(status) {
                        progress(.retry(reason: reason, completed: completed, total: total, detail: status))
                    }
                }
            }
        } onCancel: {
            cancellation.cancel()
        }
        guard status == "enroll-completed" else { throw Self.failure(status, operation: "enrollment") }
        guard let print = try fprintdPrints(fprintd).first(where: { $0.finger == finger }) else {
            throw AuthenticationError(.biometryNotEnrolled, "fprintd completed the enrollment but lists no print")
        }
        return print
    }

    /// This user's prints as fprintd lists them. Each is named by its finger and, where fprintd's store can be read,
    /// by its file's identity, so that a finger enrolled again gets a new identifier.
    func fprintdPrints(_ fprintd: FprintdReader) throws -> [EnrolledPrintInfo] {
        let user = configuration.username
        let fingers = try fprintd.enrolledFingers(user: user)
        let files = fprintd.printFiles(user: user) ?? []
        return try fingers.map { finger in
            // `<driver>/<device>/<finger number in hex>`, fprintd's layout.
            let file = files.first { Int($0.path.split(separator: "/").last ?? "", radix: 16) == finger.rawValue }
            let parts = file?.path.split(separator: "/").map(String.init) ?? []
            var digest = SHA256()
            digest.update(Data("la.fprintd-print.v1\0\(user)\0\(finger.rawValue)".utf8))
            if let info = file?.info { digest.update(Self.identity(of: info)) }
            return EnrolledPrintInfo(
                identifier: try PrintIdentifier(bytes: Data(digest.finalize().prefix(16))), finger: finger,
                username: user, driver: parts.count == 3 ? parts[0] : "fprintd",
                deviceID: parts.count == 3 ? parts[1] : "default",
                enrolledAt: file.map { Date(timeIntervalSince1970: TimeInterval($0.info.st_mtim.tv_sec)) }
                    ?? Date(timeIntervalSince1970: 0))
        }
    }

    /// The enrolled set's hash on fprintd. Its base is SHA-256 over every print file fprintd keeps for the user
    /// (path, the file's identity — inode, size, times — and its contents' hash): any enroll, re-enroll (fprintd
    /// writes a new file even for identical bytes), delete or copy by any tool changes it, and it is computed afresh
    /// on every call, so changes made while we run are seen at the next evaluation. Each new base seen raises the
    /// enrollment generation (in the attempt policy, authenticated), which the hash includes: removing the finger
    /// added since never brings an earlier set's hash back, as on Apple's devices. nil when nothing is enrolled.
    ///
    /// - Throws: `biometryNotAvailable` when fprintd's store cannot be read (its directories are root's: a program
    ///   not running as root gets no state hash, rather than one that would miss a re-enrollment).
    func fprintdStateHash(_ fprintd: FprintdReader) throws -> Data? {
        guard let files = fprintd.printFiles(user: configuration.username) else {
            throw AuthenticationError(
                .biometryNotAvailable,
                "fprintd's prints under \(fprintd.printDirectory) cannot be read by this process: the enrolled set's "
                    + "state hash needs localauthd (root)")
        }
        var hasher = SHA256()
        hasher.update(Data("la.fprintd-set.v1\0\(configuration.username)\0".utf8))
        for file in files {
            let base = fprintd.printDirectory + "/" + configuration.username + "/" + file.path
            guard let contents = FileManager.default.contents(atPath: base) else {
                throw AuthenticationError(.biometryNotAvailable, "fprintd's print \(base) cannot be read")
            }
            hasher.update(Data("\(file.path)\0".utf8))
            hasher.update(Self.identity(of: file.info))
            hasher.update(SHA256.hash(contents))
        }
        let base = hasher.finalize()
        let seen = configuration.stateDirectory + "/fprintd-set.seen"
        if (try? PrivateFiles.read(seen)) != base {
            try policy.advanceEnrollmentGeneration()
            do {
                try PrivateFiles.writeAtomically(base, to: seen)
            } catch {
                throw AuthenticationError(.biometryNotAvailable, "cannot record the enrolled set: \(error)")
            }
        }
        guard !files.isEmpty else { return nil }
        var combined = SHA256()
        combined.update(Data("la.enrolled-set.fprintd.v1".utf8))
        combined.update(withUnsafeBytes(of: try policy.enrollmentGeneration().bigEndian) { Data($0) })
        combined.update(base)
        return combined.finalize()
    }

    /// What tells one version of a file from another: device, inode, size, modification and change times.
    private static func identity(of info: stat) -> Data {
        let modified = "\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
        let changed = "\(info.st_ctim.tv_sec).\(info.st_ctim.tv_nsec)"
        return Data("\(info.st_dev):\(info.st_ino):\(info.st_size):\(modified):\(changed)".utf8)
    }

    /// fprintd's default device as ``ReaderInfo`` (fprintd does not say whether it can identify or store prints).
    static func readerInfo(_ device: FprintdReader.Device) -> ReaderInfo {
        ReaderInfo(
            driver: "fprintd", deviceID: device.path, name: device.name, enrollStages: device.enrollStages,
            canIdentify: false, hasStorage: false)
    }

    /// A match fprintd did not attribute to a finger, among several.
    private static func anyFinger(of prints: [EnrolledPrintInfo]) -> EnrolledPrintInfo {
        var info = prints[0]
        info.finger = .unknown
        return info
    }

    /// Ours for fprintd's statuses that ask for another scan.
    static func retryReason(_ status: String) -> ScanRetryReason? {
        switch status {
        case "verify-retry-scan", "enroll-retry-scan": .general
        case "verify-swipe-too-short", "enroll-swipe-too-short": .tooShort
        case "verify-finger-not-centered", "enroll-finger-not-centered": .centerFinger
        case "verify-remove-and-retry", "enroll-remove-and-retry": .removeFinger
        default: nil
        }
    }

    /// The error for a final status that is neither a match nor a no-match, nor a completed enrollment.
    static func failure(_ status: String, operation: String) -> AuthenticationError {
        switch status {
        case "timeout": AuthenticationError(.systemCancel, "no finger was scanned in time")
        case "cancelled": AuthenticationError(.appCancel, "the \(operation) was cancelled by the app")
        case "verify-disconnected", "enroll-disconnected":
            AuthenticationError(.biometryDisconnected, "the reader was disconnected")
        case "enroll-duplicate":
            AuthenticationError(.biometryNotAvailable, "fprintd found this print enrolled already (another finger?)")
        case "enroll-data-full": AuthenticationError(.biometryNotAvailable, "the reader has no room for another print")
        default: AuthenticationError(.biometryNotAvailable, "fprintd ended the \(operation): \(status)")
        }
    }
}
