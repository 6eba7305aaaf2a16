// Fallbacks view: the chains by primary model and reason (GET
// /admin/fallbacks), added, edited and deleted through the admin API, whose
// validation message is shown next to the field it names.

import { get, put, del, enc, ApiError } from '../api.js';
import { h, replace, setText, syncList, busy } from '../dom.js';
import { deployments } from '../data.js';

const REASONS = ['general', 'context_window', 'content_policy'];
const FIELDS = ['primaryModel', 'reason', 'fallbackModels'];

export default {
  id: 'fallbacks',
  title: 'Fallbacks',
  mount(root) {
    const tbody = h('tbody');
    const empty = h('p', { class: 'hint' });
    const msg = h('p', { class: 'msg', role: 'status' });
    const names = h('datalist', { id: 'model-names' });

    const inputs = {
      primaryModel: h('input', { id: 'fb-primary', name: 'primaryModel', list: 'model-names', autocomplete: 'off', spellcheck: 'false' }),
      reason: h('select', { id: 'fb-reason', name: 'reason' }, REASONS.map((r) => h('option', { value: r }, r))),
      fallbackModels: h('input', { id: 'fb-models', name: 'fallbackModels', autocomplete: 'off', spellcheck: 'false' }),
    };
    const errs = {};
    for (const f of FIELDS) {
      errs[f] = h('p', { class: 'field-error', id: `fb-err-${f}` });
      inputs[f].setAttribute('aria-describedby', errs[f].id);
    }
    const formErr = h('p', { class: 'field-error', role: 'alert' });
    const save = h('button', { type: 'submit' }, 'Save chain');
    const clear = h('button', { type: 'button', class: 'ghost' }, 'Clear');
    const form = h('form', { class: 'stack-form', 'aria-labelledby': 'fb-form-h', novalidate: true },
      h('h2', { id: 'fb-form-h' }, 'Add or edit a chain'),
      h('div', { class: 'field' }, h('label', { for: 'fb-primary' }, 'Primary model'), inputs.primaryModel, errs.primaryModel),
      h('div', { class: 'field' }, h('label', { for: 'fb-reason' }, 'Reason'), inputs.reason, errs.reason),
      h('div', { class: 'field' }, h('label', { for: 'fb-models' }, 'Fallback models'), inputs.fallbackModels,
        h('p', { class: 'hint' }, 'Public model names in the order they are tried, separated by commas (1 to 5).'), errs.fallbackModels),
      h('div', { class: 'buttons' }, save, clear), formErr, names);

    replace(root,
      h('p', { class: 'hint' }, 'When every deployment of the primary model failed, the gateway walks the chain for exactly that failure reason, then the global fallback_models. A response served by a fallback is marked degraded.'),
      msg,
      h('div', { class: 'scroll' }, h('table', { class: 'grid-table', 'aria-label': 'Fallback chains' },
        h('thead', {}, h('tr', {}, ['Primary model', 'Reason', 'Fallback models', 'Actions'].map((c) => h('th', { scope: 'col' }, c)))),
        tbody)),
      empty,
      form);

    function clearErrors() {
      for (const f of FIELDS) {
        setText(errs[f], '');
        inputs[f].removeAttribute('aria-invalid');
      }
      setText(formErr, '');
    }

    function fill(ch) {
      clearErrors();
      inputs.primaryModel.value = ch ? ch.primaryModel : '';
      inputs.reason.value = ch ? ch.reason : 'general';
      inputs.fallbackModels.value = ch ? ch.fallbackModels.join(', ') : '';
      inputs.primaryModel.focus();
    }

    clear.addEventListener('click', () => fill(null));

    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      busy(save, async () => {
        clearErrors();
        const body = {
          primaryModel: inputs.primaryModel.value.trim(),
          reason: inputs.reason.value,
          fallbackModels: inputs.fallbackModels.value.split(',').map((s) => s.trim()).filter(Boolean),
        };
        try {
          await put('/admin/fallbacks', body);
          setText(msg, `Saved: ${body.primaryModel} (${body.reason}) → ${body.fallbackModels.join(' → ')}.`);
          fill(null);
          await refresh();
        } catch (e) {
          showError(e);
        }
      });
    });

    function showError(e) {
      // the API names the field, with an index for one list item: fallbackModels[1]
      const field = e instanceof ApiError ? e.param.replace(/[[.].*$/, '') : '';
      if (FIELDS.includes(field)) {
        setText(errs[field], e.message);
        inputs[field].setAttribute('aria-invalid', 'true');
        inputs[field].focus();
      } else {
        setText(formErr, e.message);
      }
    }

    async function remove(ch, btn) {
      await busy(btn, async () => {
        try {
          await del(`/admin/fallbacks?primaryModel=${enc(ch.primaryModel)}&reason=${enc(ch.reason)}`);
          const undo = h('button', { type: 'button', class: 'small ghost' }, 'Undo');
          undo.addEventListener('click', () => busy(undo, async () => {
            try {
              await put('/admin/fallbacks', ch);
              setText(msg, `Restored ${ch.primaryModel} (${ch.reason}).`);
              await refresh();
            } catch (e) {
              setText(msg, 'Restoring failed: ' + e.message);
            }
          }));
          replace(msg, `Deleted the ${ch.reason} chain of ${ch.primaryModel}. `, undo);
          await refresh();
        } catch (e) {
          setText(msg, 'Deleting failed: ' + e.message);
        }
      });
    }

    async function refresh() {
      const [fb, deps] = await Promise.all([get('/admin/fallbacks'), deployments().catch(() => [])]);
      const chains = (fb.fallbacks || []).slice().sort((a, b) => a.primaryModel.localeCompare(b.primaryModel) || a.reason.localeCompare(b.reason));
      const models = [...new Set(deps.map((d) => d.model))].sort();
      syncList(names, models, (m) => m, (m) => h('option', { value: m }), () => {});
      setText(empty, chains.length ? '' : 'No fallback chains yet.');
      syncList(tbody, chains, (c) => c.primaryModel + '\u0000' + c.reason, () => {
        const edit = h('button', { type: 'button', class: 'small' }, 'Edit');
        const rm = h('button', { type: 'button', class: 'small danger' }, 'Delete');
        const tr = h('tr', {}, h('th', { scope: 'row' }), h('td'), h('td'), h('td', { class: 'actions' }, edit, rm));
        edit.addEventListener('click', () => fill(tr._chain));
        rm.addEventListener('click', () => remove(tr._chain, rm));
        return tr;
      }, (tr, c) => {
        tr._chain = c;
        setText(tr.children[0], c.primaryModel);
        setText(tr.children[1], c.reason);
        setText(tr.children[2], c.fallbackModels.join(' → '));
      });
    }
    return { refresh };
  },
};
