// RightObserver: several rights, one observer printing every transition it is told about.
//
//     RightObserver [--passcodes secret,wrong,-]
//
// Three rights guard three parts of an app. One observer listens to `LARight.didBecomeAuthorizedNotification`
// and `LARight.didBecomeUnauthorizedNotification` on `NotificationCenter.default` for all of them (object: nil)
// and prints each transition with the right's tag. The program then authorizes each right in turn (on the terminal,
// or with `--passcodes`: one answer per right, `-` cancels) and logs every authorized right out again.

import Foundation
import LocalAuthentication

/// What each right guards, by tag.
let guardedParts = [1: "documents", 2: "payments", 3: "settings"]

/// Prints every right-state notification of any right.
final class RightStateObserver {
    private let tokens: [any NSObjectProtocol]

    /// Starts observing both notifications for every right.
    init() {
        let center = NotificationCenter.default
        tokens = [
            center.addObserver(forName: LARight.didBecomeAuthorizedNotification, object: nil, queue: nil) { note in
                Self.report(note, as: "authorized")
            },
            center.addObserver(forName: LARight.didBecomeUnauthorizedNotification, object: nil, queue: nil) { note in
                Self.report(note, as: "unauthorized")
            },
        ]
    }

    /// Stops observing.
    func stop() {
        for token in tokens { NotificationCenter.default.removeObserver(token) }
    }

    private static func report(_ note: Notification, as change: String) {
        guard let right = note.object as? LARight else { return }
        print("observer: right \(right.tag) (\(guardedParts[right.tag] ?? "?")) became \(change)")
    }
}

extension LARight.State {
    /// The state's name, for printing.
    var name: String {
        switch self {
        case .unknown: "unknown"
        case .authorizing: "authorizing"
        case .authorized: "authorized"
        case .notAuthorized: "notAuthorized"
        @unknown default: "state \(rawValue)"
        }
    }
}

var arguments = Array(CommandLine.arguments.dropFirst())
var scriptedAnswers: [String?]?
if let index = arguments.firstIndex(of: "--passcodes"), index + 1 < arguments.count {
    scriptedAnswers = arguments[index + 1].split(separator: ",", omittingEmptySubsequences: false)
        .map { $0 == "-" ? nil : String($0) }
    arguments.removeSubrange(index...index + 1)
}

let observer = RightStateObserver()
let rights = guardedParts.keys.sorted().map { tag in
    let right = LARight()
    right.tag = tag
    if let scriptedAnswers {
        // This right's answer only: skip the fingerprint (if a reader is present), give the passcode or cancel.
        let answer = tag <= scriptedAnswers.count ? scriptedAnswers[tag - 1] : nil
        right.presenter = ScriptedAuthenticationPresenter(fingerprintSteps: [.fallback], passcodes: [answer])
    }
    return right
}

for right in rights {
    let part = guardedParts[right.tag] ?? "?"
    print("app: authorizing right \(right.tag) (\(part))")
    do {
        try await right.authorize(localizedReason: "Open \(part)")
        print("app: right \(right.tag) is \(right.state.name)")
    } catch {
        print("app: right \(right.tag) is \(right.state.name): \(error.localizedDescription)")
    }
}
for right in rights where right.state == .authorized {
    print("app: logging right \(right.tag) out")
    await right.deauthorize()
}
observer.stop()
