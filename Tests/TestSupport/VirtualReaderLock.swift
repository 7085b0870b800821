import Authenticators
import Testing

/// Holds ``VirtualReaderEnvironment/lock`` around each test of a suite, so no other suite of the test process
/// (whatever its target) runs a libfprint reader at the same time: libfprint's virtual driver is configured
/// through process-wide environment variables.
package struct VirtualReaderLock: SuiteTrait, TestTrait, TestScoping {
    package var isRecursive: Bool { true }

    package func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        if test.isSuite { return try await function() }
        try await VirtualReaderEnvironment.lock.withLock { try await function() }
    }
}

extension Trait where Self == VirtualReaderLock {
    /// One reader user at a time across the whole test process.
    package static var virtualReaderLock: VirtualReaderLock { VirtualReaderLock() }
}
