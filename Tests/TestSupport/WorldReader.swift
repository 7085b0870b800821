import Authenticators
import Foundation
import SecurityServer
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Who owns the reader in the suites' worlds. `make test` runs the biometric suites a last time with
/// `LA_TEST_BIOMETRY=fprintd` (`scripts/run-tests fprintd`): each world then starts a real fprintd of its own
/// (``FprintdStack``) and its engine reaches the reader and the prints through it.
package enum TestBiometry: String, Sendable {
    case libfprint
    case fprintd

    package static let current: TestBiometry =
        ProcessInfo.processInfo.environment["LA_TEST_BIOMETRY"] == TestBiometry.fprintd.rawValue ? .fprintd : .libfprint
}

extension Trait where Self == ConditionTrait {
    /// Runs the test only where this process drives libfprint itself. `reason` says what fprintd does not give
    /// (a driver of our choice, our own print files); the skip and the reason appear in the fprintd pass's output.
    package static func libfprintOnly(_ reason: Comment) -> Self {
        .enabled(if: TestBiometry.current == .libfprint, reason)
    }
}

/// A world's reader: libfprint's virtual device on a socket of the world's own, driven by this process (the
/// process-wide `FP_*` variables are set here), or the virtual device of an fprintd started for the world.
package final class WorldReader: Sendable {
    /// Where scans are sent.
    package let socket: VirtualReaderSocket
    /// The world's fprintd, on the fprintd backend.
    package let fprintd: FprintdStack?

    /// Where the engine looks for fprintd when the world has none (`present` false): a bus nobody listens on.
    private let absentBus: String?

    /// The reader for a world in `directory`; with `present` false, a world without one (on fprintd: no fprintd
    /// on the bus the engine is given).
    ///
    /// - Throws: when fprintd does not start.
    package init(directory: String, present: Bool = true) throws {
        absentBus = present ? nil : "unix:path=" + directory + "/no-bus.sock"
        switch TestBiometry.current {
        case _ where !present:
            // No reader: the process-wide variables stay as they are (another suite's reader may be using them).
            socket = VirtualReaderSocket(path: directory + "/reader.sock")
            fprintd = nil
        case .libfprint:
            socket = VirtualReaderSocket(path: directory + "/reader.sock")
            // Only a test that holds the reader lock drives a reader in this process; any other world's reader is
            // for its subprocesses, which are given it (``environment``).
            if VirtualReaderLock.isHeld {
                setenv("FP_DRIVERS_WHITELIST", "virtual_device", 1)
                unsetenv("FP_VIRTUAL_DEVICE_STORAGE")
                setenv("FP_VIRTUAL_DEVICE", socket.path, 1)
            }
            fprintd = nil
        case .fprintd:
            let stack = try FprintdStack(directory: directory + "/fprintd")
            socket = VirtualReaderSocket(path: stack.readerSocket)
            fprintd = stack
        }
    }

    /// The backend an engine of this world uses.
    package var backend: BiometricAuthenticator.Configuration.Backend {
        if let absentBus, TestBiometry.current == .fprintd {
            return .fprintd(address: absentBus, printDirectory: socket.path + ".prints")
        }
        guard let fprintd else { return .libfprint }
        return .fprintd(address: fprintd.address, printDirectory: fprintd.prints)
    }

    /// What a subprocess (lactl, a daemon) needs to reach this reader.
    package var environment: [String: String] {
        guard let fprintd else {
            return [
                "LA_BIOMETRY_BACKEND": "libfprint", "LA_READER_DRIVERS": "virtual_device",
                "FP_DRIVERS_WHITELIST": "virtual_device", "FP_VIRTUAL_DEVICE": socket.path,
            ]
        }
        return fprintd.environment.merging(["LA_BIOMETRY_BACKEND": "fprintd"]) { $1 }
    }

    /// Stops the world's fprintd.
    package func stop() { fprintd?.stop() }
}
