;;; emacs_shell.el --- a user's session in M-x shell, step by step, for tests/e2e/test_emacs.py
;;
;; Loaded with `emacs --batch -Q -l'. It starts `M-x shell' (comint; bash without rc files,
;; prompt `sh$ '), waits for the shell prompt, then follows QSHELL_EMACS_STEPS: steps apart
;; by ASCII 31 (unit separator), each `TEXT<TAB>REGEXP', where TEXT is typed at the end of the buffer and sent with RET
;; (`<EOF>' is C-c C-d, `<INTERRUPT>' is C-c C-c), and REGEXP is waited for in what the
;; buffer shows after it. At the end (or when a wait times out: exit code 3) the buffer is
;; written to QSHELL_EMACS_BUFFER; every string the shell's process sent, before comint or
;; ansi-color touched it, is appended to QSHELL_EMACS_RAW as it arrives.

(require 'shell)
(require 'comint)

(defvar qshell-test-timeout-s (string-to-number (or (getenv "QSHELL_EMACS_TIMEOUT") "30")))
(defvar qshell-test-raw (getenv "QSHELL_EMACS_RAW"))
(defvar qshell-test-buffer nil)
(defvar qshell-test-mark 1 "Where the next wait starts searching.")

(defun qshell-test-record (output)
  (write-region output nil qshell-test-raw t 'silent)
  output)

(defun qshell-test-finish (code)
  (with-current-buffer qshell-test-buffer
    (write-region (point-min) (point-max) (getenv "QSHELL_EMACS_BUFFER") nil 'silent))
  (kill-emacs code))

(defun qshell-test-wait (regexp what)
  "Wait until REGEXP appears in the buffer after the last match; fail naming WHAT."
  (let ((proc (get-buffer-process qshell-test-buffer))
        (deadline (+ (float-time) qshell-test-timeout-s))
        found)
    (while (and (not found) (< (float-time) deadline))
      (with-current-buffer qshell-test-buffer
        (save-excursion
          (goto-char qshell-test-mark)
          (when (re-search-forward regexp nil t)
            (setq found (point)))))
      (unless found (accept-process-output proc 0.1)))
    (unless found
      (message "timed out waiting for %s" what)
      (qshell-test-finish 3))
    (setq qshell-test-mark found)))

(defun qshell-test-type (text)
  "Do what a user in M-x shell does for TEXT: type a line and RET, or C-c C-d, or C-c C-c."
  (with-current-buffer qshell-test-buffer
    (goto-char (point-max))
    (setq qshell-test-mark (point-max))
    (cond ((equal text "<EOF>") (comint-send-eof))
          ((equal text "<INTERRUPT>") (comint-interrupt-subjob))
          (t (insert text) (comint-send-input)))))

(setq explicit-shell-file-name "bash"
      explicit-bash-args '("--noprofile" "--norc" "-i"))
(setq qshell-test-buffer (shell "*qshell-test*"))
(with-current-buffer qshell-test-buffer
  (add-hook 'comint-preoutput-filter-functions #'qshell-test-record nil t))
(qshell-test-wait "^sh\\$ " "the shell prompt")
(dolist (step (split-string (getenv "QSHELL_EMACS_STEPS") "\x1f" t))
  (let ((parts (split-string step "\t")))
    (qshell-test-type (car parts))
    (qshell-test-wait (cadr parts) (format "%S after %S" (cadr parts) (car parts)))))
(qshell-test-finish 0)
