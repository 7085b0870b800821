import FIDOProtocol
import Foundation
import Synchronization

/// CTAPHID on a HID device the kernel makes through `/dev/uhid` (`lactl fido serve --uhid`): browsers and libfido2
/// see a USB security key (usage page 0xF1D0) on `/dev/hidraw*`, whose 64-byte reports go to the authenticator. The
/// device lives as long as the descriptor that made it: when the program ends, the kernel removes it.
///
/// Every program that opens the hidraw node shares one host side, as with a real key; CTAPHID's channels tell them
/// apart. Feature reports are answered with an error (a FIDO key has none).
public final class FIDOUHIDTransport: Sendable {
    /// The device's USB vendor: pid.codes' 0x1209.
    public static let vendor: UInt32 = 0x1209
    /// The device's USB product: a number this project uses, not registered with pid.codes.
    public static let product: UInt32 = 0x4C41

    private let descriptor: Int32
    private let server: CTAPHIDServer<Int>

    /// Makes the device on `/dev/uhid` (`path`) for `authenticator`.
    ///
    /// - Throws: a POSIX error when `path` cannot be opened (no uhid module, or no access: README, "Passkeys", says
    ///   how a user gets it) or the kernel refuses the device.
    public convenience init(path: String = "/dev/uhid", authenticator: FIDOAuthenticator) throws {
        let descriptor = open(path, O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else {
            let failure = errno
            let hint =
                switch failure {
                case ENOENT: " (the uhid module is not loaded: modprobe uhid)"
                case EACCES: " (it is root's: README, \"Passkeys\", says which udev rule gives it to the seat user)"
                default: ""
                }
            throw Self.error(failure, "cannot open \(path)", hint: hint)
        }
        try self.init(descriptor: descriptor, authenticator: authenticator)
    }

    /// Makes the device on an open uhid descriptor, which this transport owns from now on.
    package init(descriptor: Int32, authenticator: FIDOAuthenticator) throws {
        self.descriptor = descriptor
        let writer = Writer(descriptor: descriptor)
        server = CTAPHIDServer<Int>(authenticator: authenticator) { report, _ in writer.write(UHID.input(report)) }
        let created = UHID.create(
            name: "lactl fido", vendor: Self.vendor, product: Self.product, descriptor: UHID.fidoReportDescriptor)
        guard writer.write(created) else {
            let failure = errno
            close(descriptor)
            throw Self.error(failure, "the kernel refused the uhid device")
        }
    }

    /// Serves the host's reports until the descriptor fails or closes; the device is destroyed then.
    public func run() async throws {
        let (reports, continuation) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .bufferingNewest(256))
        let descriptor = self.descriptor
        let writer = Writer(descriptor: descriptor)
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: UHID.eventSize)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0, let event = UHID.parse(Array(buffer.prefix(count))) else {
                    if count <= 0 { break }
                    continue
                }
                switch event {
                case .output(let report) where report.count == CTAPHID.reportSize: continuation.yield(report)
                case .getReport, .setReport:
                    if let reply = UHID.reply(to: event, error: UInt16(EIO)) { writer.write(reply) }
                case .output, .other: break
                }
            }
            continuation.finish()
        }
        reader.name = "lactl fido uhid"
        reader.start()
        let server = self.server
        let sweeper = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(250))
                await server.expireStaleMessage()
            }
        }
        defer { sweeper.cancel() }
        for await report in reports { await server.receive(report, from: 0) }
    }

    deinit {
        Writer(descriptor: descriptor).write(UHID.destroy())
        close(descriptor)
    }

    static func error(_ code: Int32, _ message: String, hint: String = "") -> NSError {
        NSError(
            domain: NSPOSIXErrorDomain, code: Int(code),
            userInfo: [NSLocalizedDescriptionKey: "\(message): \(String(cString: strerror(code)))\(hint)"])
    }
}

/// Writes whole events to the uhid descriptor, one at a time (an event is one write).
private struct Writer: Sendable {
    let descriptor: Int32
    private static let lock = Mutex(())

    @discardableResult
    func write(_ event: [UInt8]) -> Bool {
        Self.lock.withLock { _ in
            event.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) == $0.count }
        }
    }
}
