import Enclave
import Foundation
import SecureCrypto
import TestSupport
import Testing
import TrustedPlatform

/// The passcode layer on the TPM backend (issue "Locked means locked"): the passcode classes' wrapping key needs a
/// secret the TPM releases only for the right passcode, from an object that counts wrong ones towards the TPM's
/// dictionary-attack lockout. Tried as an attacker holding a copy of the store directory on the same machine:
/// every guess must go through the TPM, and the TPM stops answering after its maximum.
@Suite(.enabled(if: SoftwareTPM.isInstalled, "swtpm is not installed (scripts/bootstrap installs it)"))
final class TPMPasscodeTests {
    let machine: SoftwareTPM
    let scratch: URL

    init() throws {
        machine = try SoftwareTPM()
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("tpm-passcode-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: scratch)
    }

    var configuration: EnclaveConfiguration {
        var configuration = EnclaveConfiguration(choice: .tpm, tcti: machine.tcti)
        configuration.unlockedKeys = .processMemory
        return configuration
    }

    func passcode(_ text: String) -> SecureBytes { SecureBytes(Array(text.utf8)) }

    func code(_ body: () throws -> Void) -> EnclaveError.Code? {
        do {
            try body()
            return nil
        } catch let error as EnclaveError {
            return error.code
        } catch {
            Issue.record("not an EnclaveError: \(error)")
            return nil
        }
    }

    var dictionaryAttackState: TPMDictionaryAttackState {
        get throws { try TPM(tcti: machine.tcti).withConnection { try $0.dictionaryAttackState() } }
    }

    /// Runs `tpm2_dictionarylockout` with `arguments` on this TPM (its lockout authorization is empty).
    func dictionaryLockout(_ arguments: [String]) throws {
        let outcome = try runCapturingOutput(
            URL(fileURLWithPath: "/usr/bin/tpm2_dictionarylockout"), arguments,
            environment: ["TPM2TOOLS_TCTI": machine.tcti, "PATH": "/usr/bin:/bin"])
        #expect(outcome.status == 0, "\(outcome.output)")
    }

    @Test func tenWrongPasscodesOnACopiedStoreTriggerTheTPMLockout() throws {
        // A TPM that allows ten failures before locking out (swtpm ships with three), as an administrator sets it
        // with tpm2_dictionarylockout; a failure is forgotten after ten minutes.
        try dictionaryLockout(["-s", "-n", "10", "-t", "600", "-l", "600"])
        #expect(try dictionaryAttackState.maximumFailures == 10)

        let store = scratch.appendingPathComponent("store")
        try Enclave(directory: store, configuration: configuration).unlock(passcode: passcode("right horse"))
        let keybag = try Data(contentsOf: store.appendingPathComponent("keybag"))
        #expect(keybag.range(of: Data("passcode-tpm".utf8)) != nil, "the passcode layer holds no TPM object")

        // The attacker's copy, opened in the attacker's own enclave: every guess is a TPM command.
        let copy = scratch.appendingPathComponent("copy")
        try FileManager.default.copyItem(at: store, to: copy)
        let attacker = try Enclave(directory: copy, configuration: configuration)
        var outcomes: [EnclaveError.Code?] = []
        for guess in 1...10 {
            outcomes.append(code { try attacker.unlock(passcode: passcode("guess \(guess)")) })
        }
        #expect(outcomes.allSatisfy { $0 == .wrongPassword }, "\(outcomes.map { $0?.rawValue ?? 0 })")
        let state = try dictionaryAttackState
        #expect(state.failures == 10 && state.isLockedOut, "\(state)")

        // Locked out: the TPM answers no guess now, not even the right passcode, in the copy or the store itself.
        #expect(code { try attacker.unlock(passcode: passcode("right horse")) } == .lockedOut)
        #expect(
            code {
                try Enclave(directory: store, configuration: configuration).unlock(passcode: passcode("right horse"))
            } == .lockedOut)
        #expect(code { try attacker.unlock(passcode: passcode("guess 11")) } == .lockedOut)
        #expect(try dictionaryAttackState.failures == 10)
        print(
            "TPM dictionary-attack lockout: after \(state.failures) wrong passcodes (maximum \(state.maximumFailures),"
                + " one failure forgotten every \(state.recoverySeconds) s); the right passcode is refused too")

        // Whoever holds the lockout hierarchy's authorization (empty here, as on many machines) clears it; then
        // the right passcode opens.
        try dictionaryLockout(["-c"])
        try attacker.unlock(passcode: passcode("right horse"))
        #expect(!attacker.isLocked)
    }

    @Test func aPasscodeTheTPMRefusedOnceCostsNoFurtherLockoutTry() throws {
        try dictionaryLockout(["-s", "-n", "10", "-t", "600", "-l", "600"])
        let store = scratch.appendingPathComponent("store")
        let enclave = try Enclave(directory: store, configuration: configuration)
        try enclave.unlock(passcode: passcode("first"))
        try enclave.lock()
        let before = try dictionaryAttackState.failures

        // The account's passcode changed with passwd: PAM accepts the new one, the keybag does not. A screen lock
        // retried five times costs one try of the TPM's ten, not five.
        for _ in 0..<5 {
            #expect(code { try enclave.unlock(passcode: passcode("second")) } == .wrongPassword)
        }
        #expect(try dictionaryAttackState.failures == before + 1)
        // Another passcode is another question for the TPM; the same one again is not.
        #expect(code { try enclave.unlock(passcode: passcode("third")) } == .wrongPassword)
        #expect(code { try enclave.changePasscode(from: passcode("third"), to: passcode("second")) } == .wrongPassword)
        #expect(try dictionaryAttackState.failures == before + 2)

        // The right previous passcode re-seals (a new TPM object), after which the new passcode opens.
        try enclave.changePasscode(from: passcode("first"), to: passcode("second"))
        try enclave.lock()
        try enclave.unlock(passcode: passcode("second"))
        #expect(!enclave.isLocked)
        // The new object has refused nothing yet: the old passcode is asked once, then remembered.
        try enclave.lock()
        #expect(code { try enclave.unlock(passcode: passcode("first")) } == .wrongPassword)
        #expect(code { try enclave.unlock(passcode: passcode("first")) } == .wrongPassword)
        #expect(try dictionaryAttackState.failures == before + 3)
        // Nothing is written: another process (another Enclave on the same store) asks the TPM again.
        #expect(
            code {
                try Enclave(directory: store, configuration: configuration).unlock(passcode: passcode("first"))
            } == .wrongPassword)
        #expect(try dictionaryAttackState.failures == before + 4)
    }

    @Test func theLayerNeedsItsTPMAndAChangedPasscodeReseals() throws {
        try dictionaryLockout(["-s", "-n", "10", "-t", "600", "-l", "600"])
        let store = scratch.appendingPathComponent("store")
        let enclave = try Enclave(directory: store, configuration: configuration)
        try enclave.unlock(passcode: passcode("first"))
        try enclave.lock()
        #expect(enclave.isLocked)

        // The account's passcode changed: the new one alone does not open the layer, the old one re-seals it.
        #expect(code { try enclave.unlock(passcode: passcode("second")) } == .wrongPassword)
        #expect(code { try enclave.changePasscode(from: passcode("not it"), to: passcode("second")) } == .wrongPassword)
        #expect(enclave.isLocked)
        try enclave.changePasscode(from: passcode("first"), to: passcode("second"))
        #expect(!enclave.isLocked)
        try enclave.lock()
        #expect(code { try enclave.unlock(passcode: passcode("first")) } == .wrongPassword)
        try enclave.unlock(passcode: passcode("second"))
        #expect(!enclave.isLocked)

        // Another TPM (the copy moved to another machine, with the root key somehow there too) opens nothing.
        let other = try SoftwareTPM()
        let copy = scratch.appendingPathComponent("copy")
        try FileManager.default.copyItem(at: store, to: copy)
        var elsewhere = EnclaveConfiguration(choice: .tpm, tcti: other.tcti)
        elsewhere.unlockedKeys = .processMemory
        #expect(code { _ = try Enclave(directory: copy, configuration: elsewhere) } == .corrupt)
    }
}
