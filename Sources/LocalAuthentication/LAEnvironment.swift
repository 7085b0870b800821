import Foundation
import KeychainServices
import SecurityClient
import SecurityProtocol
import Synchronization

/// The authentication environment of a user (`LAEnvironment`, iOS 18 / macOS 15): which mechanisms exist and
/// whether they can be used, with observers told of every change.
///
/// ``currentUser`` is the environment of the user running the program, as the program's engine sees it (the
/// embedded store, or the daemon). Changes are real events: an evaluation that ends (a lockout, or the reader
/// disconnecting mid-scan), a finger enrolled or removed through the engine, a passcode success.
///
/// Observers are called on a queue private to this library, as Apple's are on one private to LocalAuthentication,
/// and `state` already holds the new state then. Differs from Apple: without observers, `state` asks the engine each
/// time it is read (it checks the reader and PAM, so it may take a few milliseconds).
public final class LAEnvironment: NSObject, @unchecked Sendable {
    // Safe to share: `observers` and `lastState` are read and written only under `lock`; `client` is immutable.

    /// The current state of the environment (`LAEnvironmentState`).
    public typealias State = LAEnvironmentState
    /// A mechanism of the environment (`LAEnvironmentMechanism`).
    public typealias Mechanism = LAEnvironmentMechanism
    /// The biometric mechanism (`LAEnvironmentMechanismBiometry`).
    public typealias MechanismBiometry = LAEnvironmentMechanismBiometry
    /// The user password mechanism (`LAEnvironmentMechanismUserPassword`).
    public typealias MechanismUserPassword = LAEnvironmentMechanismUserPassword
    /// A companion mechanism (`LAEnvironmentMechanismCompanion`); none exist on Linux.
    public typealias MechanismCompanion = LAEnvironmentMechanismCompanion
    /// Told when the state changes (`LAEnvironmentObserver`).
    public typealias Observer = LAEnvironmentObserver

    private let client: (any SecurityClient)?
    private let lock = NSLock()
    private var observers: [ObjectIdentifier: WeakObserver] = [:]
    private var lastState: LAEnvironmentState?
    private var watcher: Task<Void, Never>?
    private let queue = DispatchQueue(label: "local-authentication.environment-observers")

    private struct WeakObserver {
        weak var observer: (any LAEnvironmentObserver)?
    }

    private static let environments = Mutex<[ObjectIdentifier: LAEnvironment]>([:])

    init(client: (any SecurityClient)?) {
        self.client = client
        super.init()
    }

    deinit { watcher?.cancel() }

    /// The environment of the user running this program (one instance per engine, so `addObserver` and
    /// `removeObserver` on `currentUser` meet the same object).
    public class var currentUser: LAEnvironment {
        guard let client = try? KeychainClientSelection.resolve() else { return LAEnvironment(client: nil) }
        let key = ObjectIdentifier(client as AnyObject)
        return environments.withLock { environments in
            if let existing = environments[key] { return existing }
            let environment = LAEnvironment(client: client)
            environments[key] = environment
            return environment
        }
    }

    /// The state now. While observers are registered, the state the last change reported (kept current by the
    /// engine's events); otherwise read afresh, which blocks while the engine checks the reader and PAM.
    public var state: LAEnvironmentState {
        if let watched = lock.withLock({ watcher == nil ? nil : lastState }) { return watched }
        return freshState
    }

    private var freshState: LAEnvironmentState {
        guard let client,
            case .environment(let snapshot)? = try? client.sendBlocking(.environment)
        else { return LAEnvironmentState(EnvironmentSnapshot.unavailable) }
        return LAEnvironmentState(snapshot)
    }

    /// Adds `observer`, held weakly, told of each change from now on.
    public func addObserver(_ observer: any LAEnvironmentObserver) {
        let start = lock.withLock { () -> Bool in
            observers[ObjectIdentifier(observer)] = WeakObserver(observer: observer)
            return watcher == nil
        }
        if start { startWatching() }
    }

    /// Removes `observer`.
    public func removeObserver(_ observer: any LAEnvironmentObserver) {
        lock.withLock { _ = observers.removeValue(forKey: ObjectIdentifier(observer)) }
    }

    private func startWatching() {
        guard let client else { return }
        let initial = freshState
        let changes = client.environmentChanges()
        lock.withLock { lastState = initial }
        let task = Task { [weak self] in
            for await snapshot in changes {
                guard let self else { return }
                self.deliver(LAEnvironmentState(snapshot))
            }
        }
        lock.withLock { watcher = task }
    }

    private func deliver(_ new: LAEnvironmentState) {
        lock.lock()
        let previous = lastState
        lastState = new
        observers = observers.filter { $0.value.observer != nil }
        let targets = observers.values.compactMap(\.observer)
        lock.unlock()
        guard let previous, previous != new else { return }
        // The observers are the program's objects, called only on this serial queue, one change at a time.
        nonisolated(unsafe) let called = targets
        queue.async {
            for observer in called { observer.environment(self, stateDidChangeFromOldState: previous) }
        }
    }
}

/// Told when an ``LAEnvironment``'s state changes (`LAEnvironmentObserver`).
public protocol LAEnvironmentObserver: AnyObject {
    /// The environment's state changed from `oldState` to its current state (`environment:stateDidChangeFromOldState:`).
    /// Optional, as in Apple's protocol.
    func environment(_ environment: LAEnvironment, stateDidChangeFromOldState oldState: LAEnvironmentState)
}

extension LAEnvironmentObserver {
    /// Does nothing (the method is optional in Apple's protocol).
    public func environment(_ environment: LAEnvironment, stateDidChangeFromOldState oldState: LAEnvironmentState) {}
}

/// The state of an ``LAEnvironment`` at one moment (`LAEnvironmentState`).
public final class LAEnvironmentState: NSObject, Sendable {
    /// The fingerprint mechanism; nil when no reader is present.
    public let biometry: LAEnvironmentMechanismBiometry?
    /// The user's password (the PAM passcode).
    public let userPassword: LAEnvironmentMechanismUserPassword?
    /// Companion devices: none on Linux.
    public let companions: [LAEnvironmentMechanismCompanion]

    init(_ snapshot: EnvironmentSnapshot) {
        biometry = snapshot.readerPresent ? LAEnvironmentMechanismBiometry(snapshot) : nil
        userPassword = LAEnvironmentMechanismUserPassword(isSet: snapshot.passcodeSet)
        companions = []
    }

    /// Every mechanism: biometry (when present), the user password, companions.
    public var allMechanisms: [LAEnvironmentMechanism] {
        [biometry, userPassword].compactMap { $0 } + companions
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? LAEnvironmentState else { return false }
        return biometry == other.biometry && userPassword == other.userPassword && companions == other.companions
    }

    public override var hash: Int { [biometry?.hash ?? 0, userPassword?.hash ?? 0].reduce(0) { $0 &* 31 &+ $1 } }
}

/// A way to authenticate (`LAEnvironmentMechanism`).
public class LAEnvironmentMechanism: NSObject, @unchecked Sendable {
    // Safe to share: every stored property of the class and its subclasses is a `let`.

    /// Whether it can be used now.
    public let isUsable: Bool
    /// Its name for people.
    public let localizedName: String
    /// An SF Symbols name for it (as Apple's; for a user interface that has those symbols).
    public let iconSystemName: String

    init(isUsable: Bool, localizedName: String, iconSystemName: String) {
        self.isUsable = isUsable
        self.localizedName = localizedName
        self.iconSystemName = iconSystemName
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? LAEnvironmentMechanism, type(of: other) == type(of: self) else { return false }
        return isUsable == other.isUsable && localizedName == other.localizedName
    }

    public override var hash: Int { isUsable ? 1 : 0 }
}

/// The fingerprint reader and its enrolled prints (`LAEnvironmentMechanismBiometry`).
public final class LAEnvironmentMechanismBiometry: LAEnvironmentMechanism, @unchecked Sendable {
    /// ``LABiometryType/touchID`` (a fingerprint reader).
    public let biometryType: LABiometryType
    /// Whether a finger is enrolled.
    public let isEnrolled: Bool
    /// Whether biometry is locked out after failed attempts (the passcode lifts it).
    public let isLockedOut: Bool
    /// The enrolled-set hash as this application sees it (different in each application); nil with nothing enrolled.
    public let stateHash: Data?
    /// Whether a built-in sensor cannot be used (never on Linux: readers are external or simply present).
    public let builtInSensorInaccessible: Bool

    init(_ snapshot: EnvironmentSnapshot) {
        biometryType = .touchID
        isEnrolled = snapshot.enrolled
        isLockedOut = snapshot.lockedOut
        stateHash = snapshot.stateHash
        builtInSensorInaccessible = false
        super.init(
            isUsable: snapshot.readerPresent && snapshot.enrolled && !snapshot.lockedOut, localizedName: "Fingerprint",
            iconSystemName: "touchid")
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? LAEnvironmentMechanismBiometry, super.isEqual(object) else { return false }
        return isEnrolled == other.isEnrolled && isLockedOut == other.isLockedOut && stateHash == other.stateHash
    }
}

/// The user's password (`LAEnvironmentMechanismUserPassword`): here the login password PAM checks.
public final class LAEnvironmentMechanismUserPassword: LAEnvironmentMechanism, @unchecked Sendable {
    /// Whether the user has a password PAM can check.
    public let isSet: Bool

    init(isSet: Bool) {
        self.isSet = isSet
        super.init(isUsable: isSet, localizedName: "Password", iconSystemName: "key.fill")
    }
}

/// A companion device (`LAEnvironmentMechanismCompanion`); Linux has none, so no instance is ever made.
public final class LAEnvironmentMechanismCompanion: LAEnvironmentMechanism, @unchecked Sendable {
    /// The kind of companion.
    public let type: LACompanionType
    /// Its state hash.
    public let stateHash: Data?

    private init(type: LACompanionType) {
        self.type = type
        stateHash = nil
        super.init(isUsable: false, localizedName: "Companion", iconSystemName: "applewatch")
    }
}

extension EnvironmentSnapshot {
    /// What a program without an engine sees: nothing usable.
    static let unavailable = EnvironmentSnapshot(
        readerPresent: false, enrolled: false, lockedOut: false, stateHash: nil, passcodeSet: false)
}
