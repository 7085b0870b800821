import Authenticators
internal import CFPrint
internal import CPAM
import Foundation
import SecureCrypto
import SecurityProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// Our authenticators against the raw library calls they wrap, in the same run: fingerprint verify against
/// `fp_device_verify_sync` on libfprint's virtual reader (scans queued in advance, so the reader costs the same
/// for both), and passcode authentication against `pam_start_confdir` + `pam_authenticate` + `pam_acct_mgmt` +
/// `pam_end` with pam_matrix. The difference is what our layers add per attempt: the thread hop, the attempt
/// policy file, decrypting the enrolled prints, the conversation. Target: at most 1 ms per attempt.
enum AuthenticatorBenchmarks {
    static let printID = "bench-finger"

    /// Runs both comparisons and prints one line each; a part that cannot run says why instead.
    static func run() async throws {
        print("== authenticators vs raw libfprint / PAM (added time per attempt; target <= 1000 us)")
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            try await fingerprintVerify(directory: directory)
        } catch {
            print("fingerprint verify: not measured: \(error)")
        }
        do {
            try await FprintdBenchmarks.run(directory: directory)
        } catch {
            print("fingerprint verify through fprintd: not measured: \(error)")
        }
        do {
            try await passcodeAuthenticate(directory: directory)
        } catch {
            print("passcode authenticate: not measured: \(error)")
        }
    }

    // MARK: Fingerprint

    /// Enrolls on the virtual reader, then times `attempts` verifies through ``BiometricAuthenticator`` and
    /// `attempts` bare `fp_device_verify_sync` calls, each with its scans queued in advance.
    static func fingerprintVerify(directory: String, attempts: Int = 1000) async throws {
        let socketPath = directory + "/reader.sock"
        setenv("FP_DRIVERS_WHITELIST", "virtual_device", 1)
        setenv("FP_VIRTUAL_DEVICE", socketPath, 1)
        let authenticator = try BiometricAuthenticator(
            configuration: .init(
                stateDirectory: directory + "/state", username: "bench", drivers: ["virtual_device"]))
        try await authenticator.open()
        async let enrolled = authenticator.enroll(finger: .rightIndex)
        try await feed(socketPath, Array(repeating: "SCAN \(printID)", count: 5))
        _ = try await enrolled

        // Ours: one verify consumes the SLEEP (during which the remaining scans are queued) and a scan; the
        // timed verifies then find their scan already waiting.
        async let warmUp = authenticator.verify()
        let feedTime = try await feed(
            socketPath, ["SLEEP 3000"] + Array(repeating: "SCAN \(printID)", count: attempts + 1))
        _ = try await warmUp
        let start = ContinuousClock.now
        for _ in 0..<attempts { _ = try await authenticator.verify() }
        let ours = Double(attempts) / seconds(ContinuousClock.now - start)
        let template = try authenticator.store.prints()[0].template
        await authenticator.close()

        // Baseline: the same reader and print through the bare sync call, on the same libfprint thread.
        let baselineFeed = Task {
            try await feed(socketPath, ["SLEEP 3000"] + Array(repeating: "SCAN \(printID)", count: attempts + 1))
        }
        let baseline = try await BiometricAuthenticator.fprintThread.run {
            try rawVerifyRate(template: template, attempts: attempts)
        }
        let baselineFeedTime = try await baselineFeed.value
        if max(feedTime, baselineFeedTime) > .seconds(3) {
            print(
                "fingerprint verify: warning: queueing scans took longer than the reader's SLEEP; rates include feeding"
            )
        }
        report(
            "fingerprint verify (virtual reader)", ours: ours, baseline: baseline, baselineName: "fp_device_verify_sync"
        )
    }

    /// Opens the virtual reader with a fresh context, verifies `attempts + 1` times (the first absorbs the
    /// SLEEP), and returns the rate of the last `attempts`. Runs on the libfprint thread.
    static func rawVerifyRate(template: SecureBytes, attempts: Int) throws -> Double {
        let context = fp_context_new()!
        defer { g_object_unref(context) }
        let devices = fp_context_get_devices(context)!
        var device: UnsafeMutablePointer<FpDevice>?
        for index in 0..<Int(devices.pointee.len) {
            let candidate = devices.pointee.pdata[index]!.assumingMemoryBound(to: FpDevice.self)
            if String(cString: fp_device_get_driver(candidate)) == "virtual_device" { device = candidate }
        }
        guard let device else { throw BenchFailure("virtual_device not found") }
        var error: UnsafeMutablePointer<GError>?
        guard fp_device_open_sync(device, nil, &error) != 0 else { throw BenchFailure("open failed") }
        defer { fp_device_close_sync(device, nil, nil) }
        let print = template.withUnsafeBytes {
            fp_print_deserialize($0.baseAddress!.assumingMemoryBound(to: guchar.self), gsize($0.count), nil)
        }
        guard let print else { throw BenchFailure("print did not deserialize") }
        if g_object_is_floating(UnsafeMutableRawPointer(print)) != 0 {
            g_object_ref_sink(UnsafeMutableRawPointer(print))
        }
        defer { g_object_unref(UnsafeMutableRawPointer(print)) }
        func verifyOnce() throws {
            var match: gboolean = 0
            var scanned: OpaquePointer?
            guard fp_device_verify_sync(device, print, nil, nil, nil, &match, &scanned, nil) != 0, match != 0 else {
                throw BenchFailure("raw verify did not match")
            }
            if let scanned { g_object_unref(UnsafeMutableRawPointer(scanned)) }
        }
        try verifyOnce()
        let start = ContinuousClock.now
        for _ in 0..<attempts { try verifyOnce() }
        return Double(attempts) / seconds(ContinuousClock.now - start)
    }

    // MARK: Passcode

    /// Times ``PasscodeAuthenticator/authenticate(user:presenter:)`` (policy on) and bare PAM transactions for
    /// about 2 s each against a pam_matrix service written into `directory`.
    static func passcodeAuthenticate(directory: String) async throws {
        let module = "/usr/lib/x86_64-linux-gnu/pam_wrapper/pam_matrix.so"
        guard FileManager.default.fileExists(atPath: module) else {
            print("passcode authenticate: not measured: pam_matrix missing (apt-get install libpam-wrapper)")
            return
        }
        let confdir = directory + "/pam"
        try FileManager.default.createDirectory(atPath: confdir, withIntermediateDirectories: true)
        try "bench:secret:la-bench\n".write(toFile: confdir + "/passdb", atomically: true, encoding: .utf8)
        try "auth required \(module) passdb=\(confdir)/passdb\naccount required \(module) passdb=\(confdir)/passdb\n"
            .write(toFile: confdir + "/la-bench", atomically: true, encoding: .utf8)

        let authenticator = PasscodeAuthenticator(
            configuration: .init(service: "la-bench", configurationDirectory: confdir),
            policy: try AttemptPolicy(directory: directory + "/pam-state"))
        let presenter = FixedPasscode()
        for _ in 0..<50 { try await authenticator.authenticate(user: "bench", presenter: presenter) }
        var iterations = 0
        let start = ContinuousClock.now
        while ContinuousClock.now - start < .seconds(2) {
            try await authenticator.authenticate(user: "bench", presenter: presenter)
            iterations += 1
        }
        let ours = Double(iterations) / seconds(ContinuousClock.now - start)

        let baseline = try await PasscodeAuthenticator.transactions.run(for: "raw") {
            for _ in 0..<50 { try rawPAM(confdir: confdir) }
            var iterations = 0
            let start = ContinuousClock.now
            while ContinuousClock.now - start < .seconds(2) {
                try rawPAM(confdir: confdir)
                iterations += 1
            }
            return Double(iterations) / seconds(ContinuousClock.now - start)
        }
        report(
            "passcode authenticate (pam_matrix)", ours: ours, baseline: baseline,
            baselineName: "pam_start_confdir+pam_authenticate+pam_acct_mgmt+pam_end")
    }

    /// One bare PAM transaction with a minimal conversation.
    static func rawPAM(confdir: String) throws {
        let conversation:
            @convention(c) (
                Int32, UnsafeMutablePointer<UnsafePointer<pam_message>?>?,
                UnsafeMutablePointer<UnsafeMutablePointer<pam_response>?>?, UnsafeMutableRawPointer?
            ) -> Int32 = { count, _, responses, _ in
                guard let responses else { return PAM_SUCCESS }
                let array = calloc(Int(count), MemoryLayout<pam_response>.stride)!.assumingMemoryBound(
                    to: pam_response.self)
                for index in 0..<Int(count) { array[index].resp = strdup("secret") }
                responses.pointee = array
                return PAM_SUCCESS
            }
        var conv = pam_conv(conv: conversation, appdata_ptr: nil)
        var handle: OpaquePointer?
        guard pam_start_confdir("la-bench", "bench", &conv, confdir, &handle) == PAM_SUCCESS, let handle else {
            throw BenchFailure("pam_start_confdir failed")
        }
        var status = pam_authenticate(handle, 0)
        if status == PAM_SUCCESS { status = pam_acct_mgmt(handle, 0) }
        pam_end(handle, status)
        guard status == PAM_SUCCESS else { throw BenchFailure("raw PAM transaction failed: \(status)") }
    }

    struct FixedPasscode: PasscodePresenter {
        func answer(_ prompt: PasscodePrompt) -> SecureBytes? { SecureBytes(Array("secret".utf8)) }
        func show(_ message: PasscodeMessage) {}
    }

    // MARK: Helpers

    struct BenchFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Prints `name: ours X ops/s, baseline Y ops/s (what), ratio Z, added N us per attempt`. Both rates are
    /// wall-clock rates: the thread hops and waits our layers add are part of what is measured.
    static func report(
        _ name: String, ours: Double, baseline: Double, baselineName: String, targetMicroseconds: Int = 1000
    ) {
        let added = (1 / ours - 1 / baseline) * 1_000_000
        func format(_ value: Double) -> String { String(format: "%.0f", value) }
        print(
            "\(name): ours \(format(ours)) ops/s, baseline \(format(baseline)) ops/s "
                + "(\(baselineName)), ratio \(String(format: "%.2f", ours / baseline)), "
                + "added \(String(format: "%.0f", added)) us per attempt (target <= \(targetMicroseconds) us)")
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func makeTemporaryDirectory() throws -> String {
        var template = Array("/tmp/la-bench-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw BenchFailure("mkdtemp failed") }
        return String(cString: made)
    }

    /// Sends each command to the virtual reader (the library's protocol client) and returns how long it took.
    @discardableResult
    static func feed(_ path: String, _ commands: [String]) async throws -> Duration {
        let start = ContinuousClock.now
        try await VirtualReaderSocket(path: path).send(commands)
        return ContinuousClock.now - start
    }
}
