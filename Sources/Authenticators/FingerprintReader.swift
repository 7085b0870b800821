internal import CFPrint
import Foundation
import Logging
import SecureCrypto
import SecurityProtocol

/// The libfprint context and the chosen device.
///
/// Every method must run on ``BiometricAuthenticator/fprintThread``: libfprint's `*_sync` calls pump GLib's global
/// default main context, and two of them must never run at once.
// Safe to share: it is only ever used from jobs on the single libfprint thread (`BiometricAuthenticator` submits
// every call there), so its pointers are never touched by two threads.
final class FingerprintReader: @unchecked Sendable {
    private static let logger = Logger(label: "local-authentication.fingerprint")

    /// Acceptable driver ids in order of preference; nil accepts any reader.
    let drivers: [String]?
    private var context: UnsafeMutablePointer<FpContext>?
    private var device: UnsafeMutablePointer<FpDevice>?
    private(set) var info: ReaderInfo?

    init(drivers: [String]?) {
        self.drivers = drivers
    }

    // MARK: Discovery, open, close

    /// Opens the reader, discovering it first (a fresh `FpContext`) if there is none open.
    @discardableResult
    func ensureOpen() throws -> ReaderInfo {
        if let info, device != nil { return info }
        release()
        let context = fp_context_new()!
        self.context = context
        guard let devices = fp_context_get_devices(context) else {
            throw AuthenticationError(.biometryNotAvailable, "libfprint could not list readers")
        }
        var candidates: [(driver: String, id: String, device: UnsafeMutablePointer<FpDevice>)] = []
        for index in 0..<Int(devices.pointee.len) {
            guard let raw = devices.pointee.pdata[index] else { continue }
            let device = raw.assumingMemoryBound(to: FpDevice.self)
            candidates.append(
                (
                    String(cString: fp_device_get_driver(device)),
                    String(cString: fp_device_get_device_id(device)), device
                ))
        }
        // Pick by driver name, never by index: the order of libfprint's device array is not stable.
        let chosen: (driver: String, id: String, device: UnsafeMutablePointer<FpDevice>)?
        if let drivers {
            chosen =
                drivers.lazy.compactMap { driver in
                    candidates.filter { $0.driver == driver }.min { $0.id < $1.id }
                }.first
        } else {
            chosen = candidates.min { ($0.driver, $0.id) < ($1.driver, $1.id) }
        }
        guard let chosen else {
            let found = candidates.map(\.driver).joined(separator: ", ")
            let wanted = drivers.map { " (wanted driver: \($0.joined(separator: " or ")))" } ?? ""
            release()
            throw AuthenticationError(
                .biometryNotAvailable,
                "no fingerprint reader found\(wanted)" + (found.isEmpty ? "" : "; found: \(found)"))
        }
        var error: UnsafeMutablePointer<GError>?
        if fp_device_open_sync(chosen.device, nil, &error) == 0 {
            let failure = Self.translate(error, cancellation: nil, operation: "open the reader")
            release()
            throw failure
        }
        device = chosen.device
        let info = ReaderInfo(
            driver: chosen.driver, deviceID: chosen.id,
            name: String(cString: fp_device_get_name(chosen.device)),
            enrollStages: Int(fp_device_get_nr_enroll_stages(chosen.device)),
            canIdentify: fp_device_has_feature(chosen.device, FP_DEVICE_FEATURE_IDENTIFY) != 0,
            hasStorage: fp_device_has_feature(chosen.device, FP_DEVICE_FEATURE_STORAGE) != 0)
        self.info = info
        Self.logger.debug("reader opened", metadata: ["driver": "\(info.driver)", "device": "\(info.deviceID)"])
        return info
    }

    /// Closes the reader (errors, e.g. from an unplugged reader, are ignored) and drops the context, so the next
    /// ``ensureOpen()`` discovers readers afresh.
    func release() {
        if let device {
            var error: UnsafeMutablePointer<GError>?
            if fp_device_is_open(device) != 0, fp_device_close_sync(device, nil, &error) == 0 {
                g_error_free(error)
            }
        }
        device = nil
        info = nil
        if let context {
            g_object_unref(context)
            self.context = nil
        }
    }

    // MARK: Prints

    /// Deserializes `template` and checks that it belongs to this reader; nil when it was made by another reader.
    private func loadPrint(_ template: SecureBytes, device: UnsafeMutablePointer<FpDevice>) throws -> OpaquePointer? {
        var error: UnsafeMutablePointer<GError>?
        let print = template.withUnsafeBytes { bytes in
            fp_print_deserialize(bytes.baseAddress?.assumingMemoryBound(to: guchar.self), gsize(bytes.count), &error)
        }
        guard let print else {
            let message = error.map { String(cString: $0.pointee.message) } ?? "unknown error"
            g_error_free(error)
            throw AuthenticationError(.invalidContext, "a stored print could not be parsed: \(message)")
        }
        Self.sinkIfFloating(print)
        if fp_print_compatible(print, device) == 0 {
            g_object_unref(UnsafeMutableRawPointer(print))
            return nil
        }
        return print
    }

    /// Takes ownership of a floating reference (`FpPrint` is a `GInitiallyUnowned`, gotcha G11).
    private static func sinkIfFloating(_ print: OpaquePointer) {
        let object = UnsafeMutableRawPointer(print)
        if g_object_is_floating(object) != 0 { _ = g_object_ref_sink(object) }
    }

    // MARK: Enroll

    /// Scans a new print of `finger` for `username`; returns its serialized template.
    func enroll(
        finger: Finger, username: String, cancellation: OperationCancellation, timeout: Duration,
        progress: @escaping @Sendable (EnrollmentEvent) -> Void
    ) throws -> (template: SecureBytes, driver: String, deviceID: String) {
        let info = try ensureOpen()
        let device = self.device!
        let template = fp_print_new(device)!
        Self.sinkIfFloating(template)
        defer { g_object_unref(UnsafeMutableRawPointer(template)) }
        fp_print_set_finger(template, FpFinger(rawValue: UInt32(finger.rawValue)))
        fp_print_set_username(template, username)
        // Without an enroll date a serialize/deserialize round trip yields a bogus date (gotcha G12).
        let date = g_date_new()!
        g_date_set_time_t(date, time(nil))
        fp_print_set_enroll_date(template, date)
        g_date_free(date)

        let reporter = EnrollReporter(
            total: info.enrollStages, cancellation: cancellation, timeout: timeout,
            progress: progress)
        let userData = Unmanaged.passRetained(reporter)
        defer { userData.release() }
        cancellation.arm(timeout)
        defer { cancellation.finish() }
        var error: UnsafeMutablePointer<GError>?
        let callback: FpEnrollProgress = { _, completed, _, userData, error in
            let reporter = Unmanaged<EnrollReporter>.fromOpaque(userData!).takeUnretainedValue()
            reporter.report(completed: Int(completed), error: error)
        }
        guard
            let enrolled = fp_device_enroll_sync(
                device, template, cancellation.cancellable, callback, userData.toOpaque(), &error)
        else {
            throw handleFailure(error, cancellation: cancellation, operation: "enroll")
        }
        defer { g_object_unref(UnsafeMutableRawPointer(enrolled)) }
        let serialized = try Self.serialize(enrolled)
        return (
            serialized, String(cString: fp_print_get_driver(enrolled)),
            String(cString: fp_print_get_device_id(enrolled))
        )
    }

    private static func serialize(_ print: OpaquePointer) throws -> SecureBytes {
        var data: UnsafeMutablePointer<guchar>?
        var length: gsize = 0
        var error: UnsafeMutablePointer<GError>?
        guard fp_print_serialize(print, &data, &length, &error) != 0, let data else {
            let message = error.map { String(cString: $0.pointee.message) } ?? "unknown error"
            g_error_free(error)
            throw AuthenticationError(.biometryNotAvailable, "the new print could not be serialized: \(message)")
        }
        defer {
            explicit_bzero(data, Int(length))
            g_free(data)
        }
        return SecureBytes(count: Int(length)) {
            $0.copyMemory(from: UnsafeRawBufferPointer(start: data, count: Int(length)))
        }
    }

    // MARK: Verify

    /// Waits for a finger and matches it against `candidates`; returns the identifier of the matching print, or
    /// nil for a finger that matches none. Retries are reported and scanned again within a fresh deadline.
    func match(
        candidates: [(identifier: PrintIdentifier, template: SecureBytes)], cancellation: OperationCancellation,
        timeout: Duration, progress: @escaping @Sendable (VerificationEvent) -> Void
    ) throws -> PrintIdentifier? {
        let info = try ensureOpen()
        let device = self.device!
        var prints: [(identifier: PrintIdentifier, print: OpaquePointer)] = []
        defer { for entry in prints { g_object_unref(UnsafeMutableRawPointer(entry.print)) } }
        for candidate in candidates {
            if let print = try loadPrint(candidate.template, device: device) {
                prints.append((candidate.identifier, print))
            }
        }
        guard !prints.isEmpty else {
            throw AuthenticationError(
                .biometryNotEnrolled, "no fingerprint is enrolled for the reader '\(info.name)' (\(info.driver))")
        }
        defer { cancellation.finish() }
        while true {
            progress(.waitingForFinger)
            cancellation.arm(timeout)
            var error: UnsafeMutablePointer<GError>?
            let outcome: PrintIdentifier??
            if info.canIdentify {
                outcome = identify(device, prints, cancellation, &error)
            } else {
                outcome = verify(device, prints, cancellation, &error)
            }
            if let outcome { return outcome }
            if let retry = error, retry.pointee.domain == fp_device_retry_quark() {
                let reason = ScanRetryReason(rawValue: Int(retry.pointee.code))
                let detail = String(cString: retry.pointee.message)
                g_error_free(retry)
                progress(.retry(reason: reason, detail: detail))
                continue
            }
            throw handleFailure(error, cancellation: cancellation, operation: "verify")
        }
    }

    /// One `fp_device_identify_sync`: `.some(id)` match, `.some(nil)` no match, nil with `error` set on failure.
    private func identify(
        _ device: UnsafeMutablePointer<FpDevice>, _ prints: [(identifier: PrintIdentifier, print: OpaquePointer)],
        _ cancellation: OperationCancellation, _ error: inout UnsafeMutablePointer<GError>?
    ) -> PrintIdentifier?? {
        let gallery = g_ptr_array_new_with_free_func { g_object_unref($0) }!
        defer { g_ptr_array_unref(gallery) }
        for entry in prints { g_ptr_array_add(gallery, g_object_ref(UnsafeMutableRawPointer(entry.print))) }
        var matched: OpaquePointer?
        var scanned: OpaquePointer?
        let ok = fp_device_identify_sync(
            device, gallery, cancellation.cancellable, nil, nil, &matched, &scanned, &error)
        defer {
            if let matched { g_object_unref(UnsafeMutableRawPointer(matched)) }
            if let scanned { g_object_unref(UnsafeMutableRawPointer(scanned)) }
        }
        guard ok != 0 else { return nil }
        guard let matched else { return .some(nil) }
        let entry = prints.first { $0.print == matched } ?? prints.first { fp_print_equal($0.print, matched) != 0 }
        return .some(entry?.identifier)
    }

    /// One `fp_device_verify_sync` against the first print; for readers without identify, a scan that misses the
    /// first print is compared with the others by `fp_print_equal` (exact for match-on-host raw prints).
    private func verify(
        _ device: UnsafeMutablePointer<FpDevice>, _ prints: [(identifier: PrintIdentifier, print: OpaquePointer)],
        _ cancellation: OperationCancellation, _ error: inout UnsafeMutablePointer<GError>?
    ) -> PrintIdentifier?? {
        var match: gboolean = 0
        var scanned: OpaquePointer?
        let ok = fp_device_verify_sync(
            device, prints[0].print, cancellation.cancellable, nil, nil, &match, &scanned, &error)
        defer { if let scanned { g_object_unref(UnsafeMutableRawPointer(scanned)) } }
        guard ok != 0 else { return nil }
        if match != 0 { return .some(prints[0].identifier) }
        if let scanned, let other = prints.dropFirst().first(where: { fp_print_equal($0.print, scanned) != 0 }) {
            return .some(other.identifier)
        }
        return .some(nil)
    }

    // MARK: Delete

    /// Deletes `template` from the reader's own storage, when the reader has one and the print lives there.
    func deleteFromDevice(_ template: SecureBytes) throws {
        let info = try ensureOpen()
        guard info.hasStorage, fp_device_has_feature(device!, FP_DEVICE_FEATURE_STORAGE_DELETE) != 0,
            let print = try loadPrint(template, device: device!)
        else { return }
        defer { g_object_unref(UnsafeMutableRawPointer(print)) }
        guard fp_print_get_device_stored(print) != 0 else { return }
        var error: UnsafeMutablePointer<GError>?
        if fp_device_delete_print_sync(device!, print, nil, &error) == 0 {
            if let error, error.pointee.domain == fp_device_error_quark(),
                error.pointee.code == Int32(FP_DEVICE_ERROR_DATA_NOT_FOUND.rawValue)
            {
                g_error_free(error)
                return
            }
            throw handleFailure(error, cancellation: nil, operation: "delete the print from the reader")
        }
    }

    // MARK: Errors

    /// Translates a failure and, when the reader is gone, drops it so the next operation rediscovers readers.
    private func handleFailure(
        _ error: UnsafeMutablePointer<GError>?, cancellation: OperationCancellation?, operation: String
    ) -> AuthenticationError {
        let failure = Self.translate(error, cancellation: cancellation, operation: operation)
        if failure.code == .biometryDisconnected { release() }
        return failure
    }

    /// Maps a libfprint or GIO error to an ``AuthenticationError`` (and frees it).
    static func translate(
        _ error: UnsafeMutablePointer<GError>?, cancellation: OperationCancellation?, operation: String
    ) -> AuthenticationError {
        guard let error else {
            return AuthenticationError(.biometryNotAvailable, "could not \(operation): libfprint gave no reason")
        }
        defer { g_error_free(error) }
        let code = Int(error.pointee.code)
        let message = String(cString: error.pointee.message)
        if error.pointee.domain == g_io_error_quark() {
            let status = AuthenticationError.BackendStatus(library: "gio", code: code)
            if code == Int(G_IO_ERROR_CANCELLED.rawValue) {
                if cancellation?.cancellationReason == .timeout {
                    return AuthenticationError(
                        .systemCancel, "no usable finger scan before the attempt timed out", backendStatus: status)
                }
                return AuthenticationError(.appCancel, "the \(operation) was cancelled", backendStatus: status)
            }
            return AuthenticationError(
                .biometryNotAvailable, "could not \(operation): \(message)", backendStatus: status)
        }
        let isDeviceError = error.pointee.domain == fp_device_error_quark()
        let status = AuthenticationError.BackendStatus(library: "libfprint", code: code)
        if isDeviceError && code == Int(FP_DEVICE_ERROR_REMOVED.rawValue) {
            return AuthenticationError(
                .biometryDisconnected, "the fingerprint reader was disconnected; plug it in and try again",
                backendStatus: status)
        }
        if isDeviceError && code == Int(FP_DEVICE_ERROR_BUSY.rawValue) {
            return AuthenticationError(
                .biometryNotAvailable, "the fingerprint reader is busy; try again later", backendStatus: status)
        }
        return AuthenticationError(.biometryNotAvailable, "could not \(operation): \(message)", backendStatus: status)
    }
}

/// Forwards libfprint's enroll progress callback to the caller and restarts the attempt deadline at each scan.
// Safe to share: created, used by the C callback and released on the libfprint thread only.
private final class EnrollReporter: @unchecked Sendable {
    let total: Int
    let cancellation: OperationCancellation
    let timeout: Duration
    let progress: @Sendable (EnrollmentEvent) -> Void

    init(
        total: Int, cancellation: OperationCancellation, timeout: Duration,
        progress: @escaping @Sendable (EnrollmentEvent) -> Void
    ) {
        self.total = total
        self.cancellation = cancellation
        self.timeout = timeout
        self.progress = progress
    }

    func report(completed: Int, error: UnsafeMutablePointer<GError>?) {
        cancellation.arm(timeout)
        if let error, error.pointee.domain == fp_device_retry_quark() {
            progress(
                .retry(
                    reason: ScanRetryReason(rawValue: Int(error.pointee.code)), completed: completed,
                    total: total, detail: String(cString: error.pointee.message)))
        } else {
            progress(.stageCompleted(completed: completed, total: total))
        }
    }
}
