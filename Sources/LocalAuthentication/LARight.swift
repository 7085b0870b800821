import Foundation
import KeychainServices
import SecurityClient
import Synchronization

/// A grouped set of requirements that gate access to a resource or operation (`LARight`).
///
/// A right starts ``State-swift.enum/unknown``; ``authorize(localizedReason:)`` moves it to
/// ``State-swift.enum/authorizing`` and then to ``State-swift.enum/authorized`` or
/// ``State-swift.enum/notAuthorized``; ``deauthorize()`` moves an authorized right to
/// ``State-swift.enum/notAuthorized``. Each right owns an `LAContext` on the engine of the task that created it;
/// authorizing evaluates the right's requirement in that context, and deauthorizing invalidates it.
///
/// Differences from Apple:
/// - A second ``authorize(localizedReason:)`` while one is in flight joins it: no second prompt, both callers get
///   the same outcome, and the state changes once. Calling it on an authorized right succeeds at once.
/// - ``deauthorize()`` during an authorization cancels it (the authorization fails with `appCancel`).
/// - Prompts are drawn by ``presenter`` (our addition), as for `LAContext`.
/// - ``didBecomeAuthorizedNotification`` and ``didBecomeUnauthorizedNotification`` only existed in an iOS 16 beta;
///   they are kept here (spelled correctly), as is ``stateUpdates`` (our addition).
public class LARight: NSObject, @unchecked Sendable {
    // Safe to share: mutable fields live in `state` (a Mutex); `transitions` serialises state changes with their
    // announcements; `requirement` and `client` are immutable after init.

    /// The authorization state of a right (`LARight.State`).
    @objc(LARightState)
    public enum State: Int, Sendable {
        /// Not yet authorized or refused (the initial state).
        case unknown = 0
        /// An authorization is in progress.
        case authorizing = 1
        /// The right is authorized.
        case authorized = 2
        /// The last authorization failed, or the right was deauthorized.
        case notAuthorized = 3
    }

    /// Posted on `NotificationCenter.default` with the right as object when it becomes authorized.
    ///
    /// Differs from Apple: only the iOS 16 beta SDK declared it (with a misspelt unauthorized twin).
    public static let didBecomeAuthorizedNotification = Notification.Name("LARightDidBecomeAuthorizedNotification")

    /// Posted on `NotificationCenter.default` with the right as object each time it enters
    /// ``State-swift.enum/notAuthorized`` (a failed authorization or ``deauthorize()``).
    ///
    /// Differs from Apple: only the iOS 16 beta SDK declared it, as `didBecomeUnathorizedNotification`.
    public static let didBecomeUnauthorizedNotification = Notification.Name(
        "LARightDidBecomeUnauthorizedNotification")

    private struct Fields {
        var state = State.unknown
        var tag = 0
        var context: LAContext?
        var inFlight: Task<Void, any Error>?
        var presenter: (any AuthenticationPresenter)?
        var observers: [UUID: AsyncStream<State>.Continuation] = [:]
    }

    package let requirement: LAAuthenticationRequirement
    package let client: (any SecurityClient)?
    private let fields: Mutex<Fields>
    private let transitions = NSRecursiveLock()

    /// A right with the ``LAAuthenticationRequirement/default`` requirement (a fingerprint or the passcode).
    public override convenience init() {
        self.init(requirement: .default)
    }

    /// A right with `requirement`.
    public init(requirement: LAAuthenticationRequirement) {
        self.requirement = requirement
        client = try? KeychainClientSelection.resolve()
        var initial = Fields()
        initial.presenter = KeychainClientSelection.$current.withValue(client) { LAContext().presenter }
        fields = Mutex(initial)
        super.init()
    }

    deinit {
        fields.withLock { fields in
            fields.context?.invalidate()
            for continuation in fields.observers.values { continuation.finish() }
        }
    }

    /// The right's authorization state.
    public var state: State { fields.withLock { $0.state } }

    /// A value the app may use to identify the right (default 0).
    public var tag: Int {
        get { fields.withLock { $0.tag } }
        set { fields.withLock { $0.tag = newValue } }
    }

    /// Who draws this right's prompts (not in Apple's API): by default what a new `LAContext` uses (the terminal
    /// when the process has one).
    public var presenter: (any AuthenticationPresenter)? {
        get { fields.withLock { $0.presenter } }
        set { fields.withLock { $0.presenter = newValue } }
    }

    /// Every state change of this right from now on, in order, each once (not in Apple's API). Each access
    /// gives a new sequence; it ends when the right is released.
    public var stateUpdates: AsyncStream<State> {
        let (stream, continuation) = AsyncStream<State>.makeStream(bufferingPolicy: .unbounded)
        let id = UUID()
        fields.withLock { $0.observers[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.fields.withLock { $0.observers.removeValue(forKey: id) }
        }
        return stream
    }

    // MARK: Authorization

    /// Checks, without prompting, whether the right could be authorized now.
    ///
    /// - Throws: ``LAError``: `biometryNotAvailable`, `biometryNotEnrolled`, `biometryLockout`, `passcodeNotSet`,
    ///   `invalidContext`; for a persisted `.biometryCurrentSet` right whose fingerprints changed,
    ///   `authenticationFailed` saying the right was invalidated.
    public func checkCanAuthorize() async throws {
        try await checkStillValid()
        let context = newContext()
        defer { context.invalidate() }
        var error: NSError?
        let policy: LAPolicy =
            switch requirement.kind {
            case .userPresence, .biometryOrPasscode: .deviceOwnerAuthentication
            case .biometry, .biometryCurrentSet: .deviceOwnerAuthenticationWithBiometrics
            }
        if !context.canEvaluatePolicy(policy, error: &error) {
            throw error.map { LAError(_nsError: $0) } ?? LAError(.authenticationFailed)
        }
    }

    /// Calls `completion` (on another thread) with nil when ``checkCanAuthorize()`` succeeds, else its error.
    public func checkCanAuthorize(completion: @escaping @Sendable ((any Error)?) -> Void) {
        Task.detached {
            do {
                try await self.checkCanAuthorize()
                completion(nil)
            } catch {
                completion(error)
            }
        }
    }

    /// Authorizes the right, prompting through ``presenter`` with `localizedReason`.
    ///
    /// Joins an authorization already in flight; returns at once when the right is authorized.
    /// - Throws: ``LAError`` as `LAContext.evaluateAccessControl`; `appCancel` when ``deauthorize()`` ends it; for a
    ///   persisted `.biometryCurrentSet` right whose fingerprints changed, `authenticationFailed` saying the right
    ///   was invalidated.
    public func authorize(localizedReason: String) async throws {
        let task = fields.withLock { fields -> Task<Void, any Error>? in
            if fields.state == .authorized { return nil }
            return fields.inFlight
        }
        if let task { return try await task.value }
        if state == .authorized { return }
        let started = transitions.withLock { () -> Task<Void, any Error> in
            if let existing = fields.withLock({ $0.inFlight }) { return existing }
            let context = newContext()
            let task = Task<Void, any Error> { try await self.runAuthorization(context, reason: localizedReason) }
            fields.withLock {
                $0.inFlight = task
                $0.context?.invalidate()
                $0.context = context
            }
            move(to: .authorizing)
            return task
        }
        try await started.value
    }

    /// Calls `completion` (on another thread) with nil when ``authorize(localizedReason:)`` succeeds, else its
    /// error.
    public func authorize(localizedReason: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        Task.detached {
            do {
                try await self.authorize(localizedReason: localizedReason)
                completion(nil)
            } catch {
                completion(error)
            }
        }
    }

    /// Ends the authorization: an authorized right becomes ``State-swift.enum/notAuthorized`` and its context's
    /// credential is forgotten; an authorization in flight fails with `appCancel`. Does nothing otherwise.
    public func deauthorize() async {
        let (context, task) = fields.withLock { ($0.context, $0.inFlight) }
        context?.invalidate()
        if let task { _ = try? await task.value }
        transitions.withLock {
            guard fields.withLock({ $0.state }) == .authorized else { return }
            fields.withLock {
                $0.context?.invalidate()
                $0.context = nil
            }
            move(to: .notAuthorized)
        }
    }

    /// Calls `completion` (on another thread) once ``deauthorize()`` is done.
    public func deauthorize(completion: @escaping @Sendable () -> Void) {
        Task.detached {
            await self.deauthorize()
            completion()
        }
    }

    // MARK: For subclasses and keys

    /// The context that holds the right's credential, while it is authorized.
    package var authorizedContext: LAContext? {
        fields.withLock { $0.state == .authorized ? $0.context : nil }
    }

    /// Thrown before authorization when the right can no longer be authorized (persisted rights override).
    package func checkStillValid() async throws {}

    /// The access control the right's authorization evaluates.
    package func accessControlForAuthorization() throws -> SecAccessControl {
        try requirement.accessControl()
    }

    // MARK: Internals

    private func newContext() -> LAContext {
        let presenter = self.presenter
        return KeychainClientSelection.$current.withValue(client) {
            let context = LAContext()
            context.presenter = presenter
            return context
        }
    }

    private func runAuthorization(_ context: LAContext, reason: String) async throws {
        var failure: (any Error)?
        do {
            try await checkStillValid()
            _ = try await context.evaluateAccessControl(
                try accessControlForAuthorization(), operation: .useItem, localizedReason: reason)
            context.interactionNotAllowed = true
        } catch {
            failure = error
        }
        transitions.withLock {
            fields.withLock { $0.inFlight = nil }
            if failure != nil {
                context.invalidate()
                fields.withLock { if $0.context === context { $0.context = nil } }
            }
            move(to: failure == nil ? .authorized : .notAuthorized)
        }
        if let failure { throw failure }
    }

    /// Sets the state and announces the change; called with `transitions` held so announcements keep order.
    private func move(to new: State) {
        let observers = fields.withLock { fields -> [AsyncStream<State>.Continuation]? in
            guard fields.state != new else { return nil }
            fields.state = new
            return Array(fields.observers.values)
        }
        guard let observers else { return }
        for observer in observers { observer.yield(new) }
        switch new {
        case .authorized: NotificationCenter.default.post(name: Self.didBecomeAuthorizedNotification, object: self)
        case .notAuthorized:
            NotificationCenter.default.post(name: Self.didBecomeUnauthorizedNotification, object: self)
        case .unknown, .authorizing: break
        }
    }
}
