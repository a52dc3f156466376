/* sr_run: a request checked, its code vetted by the checker while the
 * sandbox is built (or first, when requirements are to be installed for
 * it), its dependency layer (deps.c), then one cold sandbox (box/),
 * start to end. */
#include "run.h"
#include "box/box.h"
#include "deps.h"

static int run_cold(const sr_run_request *req, sr_check_job *vet, sr_result *res, sr_error *err)
{
	sr_deps_layer *layer = NULL;
	sr_bind bind = { 0 };
	/* Requirements and auto-detected imports are Python's. */
	if (req->language == SR_LANG_PYTHON && sr_deps_prepare(req, res, &layer, err) < 0) {
		sr_check_abort(vet);
		return -1;
	}
	if (res->status != SR_STATUS_OK) { /* the dependencies failed: nothing ran */
		sr_check_abort(vet);
		return 0;
	}
	const char *layer_path = layer ? sr_deps_layer_path(layer) : req->deps_layer;
	if (layer_path && sr_deps_bind(req->policy, req->rootfs_dir, layer_path, &bind, err) < 0) {
		sr_check_abort(vet);
		sr_deps_layer_release(layer);
		return -1;
	}
	int rc = sr_box_run_vetted(req, NULL, &bind, layer_path ? 1 : 0, vet, res, err);
	sr_deps_bind_free(&bind);
	sr_deps_layer_release(layer);
	return rc;
}

int sr_box_run_cold(const sr_run_request *req, sr_result *res, sr_error *err)
{
	return run_cold(req, NULL, res, err);
}

int sr_run(const sr_run_request *req, sr_result *res, sr_error *err)
{
	if (sr_box_check_request(req, err))
		return -1;
	sr_box_init_result(res, req->policy);
	/* Requirements are installed only for code that passed. Otherwise the
	 * checker's child vets the code while the sandbox is built, and the
	 * sandbox goes on only if it passed (sr_box_start). */
	if (req->n_requirements) {
		if (sr_box_vet(req, res) < 0) {
			sr_box_syntax_error(req, res);
			return 0;
		}
		return run_cold(req, NULL, res, err);
	}
	sr_check_job *vet;
	if (sr_box_vet_start(req, res, &vet) < 0)
		return 0;
	int rc = run_cold(req, vet, res, err);
	if (rc == 0)
		sr_box_syntax_error(req, res);
	return rc;
}
